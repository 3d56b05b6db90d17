# A local stand-in for prom/prometheus, built by scripts/compose_e2e.py when no image registry answers: Debian's
# Prometheus on the debootstrap base (imported as book-pipeline-standin/debian:bookworm), laid out as the
# official image is: the binary as the entrypoint (the compose file gives its flags), its data in /prometheus,
# run as nobody.
FROM book-pipeline-standin/debian:bookworm
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends prometheus \
    && rm -rf /var/lib/apt/lists/* \
    && mkdir -p /prometheus /etc/prometheus \
    && chown nobody:nogroup /prometheus
USER nobody
WORKDIR /prometheus
EXPOSE 9090
ENTRYPOINT ["/usr/bin/prometheus"]
CMD ["--config.file=/etc/prometheus/prometheus.yml", "--storage.tsdb.path=/prometheus"]
