# One image for the whole stack: the Dagster code location (gRPC server), webserver and daemon, every run and
# drain-step container, and the crawl workers. Layers go from what changes least to what changes most: system
# packages, then the locked dependencies, then the code, so a code change rebuilds only the last layers.
FROM python:3.11-slim-bookworm

ENV PYTHONUNBUFFERED=1 \
    UV_COMPILE_BYTECODE=1 \
    UV_LINK_MODE=copy \
    UV_PROJECT_ENVIRONMENT=/opt/venv \
    PATH=/opt/venv/bin:$PATH \
    BOOK_PIPELINE_CHROMIUM=/usr/bin/chromium-headless-shell

# Debian's Chromium headless shell (what find_chromium prefers for a crawler, see README): a package with its
# libraries, so nothing is downloaded at run time. libatomic1: Playwright's bundled Node driver links it and
# slim images lack it. tini: PID 1 that forwards signals and reaps Chromium's children.
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        chromium-headless-shell libatomic1 tini ca-certificates \
    && rm -rf /var/lib/apt/lists/*

RUN pip install --no-cache-dir uv==0.13.8 \
    && groupadd --system --gid 10001 app \
    && useradd --system --uid 10001 --gid app --home-dir /home/app --create-home app
WORKDIR /app

# Dependencies first (cached until pyproject.toml or uv.lock change), then the project.
COPY pyproject.toml uv.lock README.md ./
RUN uv sync --frozen --no-dev --no-group quotes-site --no-install-project --no-cache
COPY book_assets ./book_assets
COPY dagster.yaml workspace.yaml ./
COPY deploy/docker/entrypoint.sh deploy/docker/workspace.yaml ./deploy/docker/
# The project is installed editable, which uv does not compile, and the unprivileged user cannot write its
# bytecode: compiled here, or every process of the stack would compile the package again at its start.
RUN uv sync --frozen --no-dev --no-group quotes-site --no-cache \
    && python -m compileall -q book_assets

# The compose stack's Dagster instance (DockerRunLauncher) in its own DAGSTER_HOME; the pipeline's files
# (data_dir: snapshots, change feed, WARC archive, Dagster's compute logs and step outputs) under
# /var/lib/book-pipeline, the volume every container of the stack shares. Both owned by the unprivileged user.
COPY deploy/docker/dagster.yaml /opt/dagster/home/dagster.yaml
RUN mkdir -p /var/lib/book-pipeline/dagster/storage /var/lib/book-pipeline/dagster/compute_logs /app/.data \
    && chown -R app:app /opt/dagster/home /var/lib/book-pipeline /app/.data
ENV DAGSTER_HOME=/opt/dagster/home \
    BOOK_PIPELINE_DATA_DIR=/var/lib/book-pipeline \
    DAGSTER_COMPUTE_LOG_DIR=/var/lib/book-pipeline/dagster/compute_logs \
    DAGSTER_ARTIFACT_DIR=/var/lib/book-pipeline/dagster/storage

USER app
ENTRYPOINT ["/usr/bin/tini", "--", "/app/deploy/docker/entrypoint.sh"]
CMD ["book-pipeline", "work"]
