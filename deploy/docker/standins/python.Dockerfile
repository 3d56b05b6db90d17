# A local stand-in for python:3.11-slim-bookworm, built by scripts/compose_e2e.py when no image registry
# answers: Debian's Python 3.11 on the debootstrap base (imported as book-pipeline-standin/debian:bookworm), with
# `python` and `pip` on PATH as in the official image. The CA certificates in ca/ (the host's extra ones, copied
# in by the script; none on an ordinary host) are trusted system-wide, and pip and uv are pointed at the
# system bundle, so builds FROM this image reach the package registries through an intercepting proxy.
FROM book-pipeline-standin/debian:bookworm
COPY ca/ /usr/local/share/ca-certificates/
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        python3.11 python3-pip python3-venv ca-certificates \
    && update-ca-certificates \
    && rm -f /usr/lib/python3.11/EXTERNALLY-MANAGED \
    && ln -s /usr/bin/python3.11 /usr/local/bin/python \
    && ln -s /usr/bin/python3.11 /usr/local/bin/python3 \
    && ln -s /usr/bin/pip3 /usr/local/bin/pip \
    && rm -rf /var/lib/apt/lists/*
ENV LANG=C.UTF-8 \
    SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt \
    PIP_CERT=/etc/ssl/certs/ca-certificates.crt \
    REQUESTS_CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt
CMD ["python3"]
