# One image for the webserver, the daemon and the crawl workers.
FROM python:3.11-slim-bookworm

ENV PYTHONUNBUFFERED=1 \
    UV_COMPILE_BYTECODE=1 \
    UV_PROJECT_ENVIRONMENT=/opt/venv \
    PATH=/opt/venv/bin:$PATH \
    PLAYWRIGHT_BROWSERS_PATH=/ms-playwright

RUN pip install --no-cache-dir uv==0.13.8
WORKDIR /app

# Dependencies first (cached layer), then the project.
COPY pyproject.toml uv.lock README.md ./
RUN uv sync --frozen --no-dev --no-install-project
COPY book_assets ./book_assets
COPY dagster.yaml workspace.yaml ./
RUN uv sync --frozen --no-dev

# Playwright's own headless shell (what find_chromium prefers: faster than full Chromium for a crawler,
# see README) and the system libraries it needs.
RUN playwright install --with-deps chromium-headless-shell && rm -rf /var/lib/apt/lists/*

ENV DAGSTER_COMPUTE_LOG_DIR=/app/.data/dagster/compute_logs \
    DAGSTER_ARTIFACT_DIR=/app/.data/dagster/storage

CMD ["book-pipeline", "work"]
