# qmd as an HTTP service (seed 003 deploys the LDIMS MCP service with Docker).
#
#   docker build -t qmd .
#   docker compose -f deploy/compose.yaml up -d      # see deploy/README.md
#
# The image holds the engine without the model extra (no llama-cpp-python build): lexical
# search and the LDIMS surface work; `semantic` searches say they fell back to exact.
# The index and config live on the /data volume; the documents are mounted read-only at /docs.

FROM python:3.11-slim AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY domain ./domain
COPY adapters ./adapters
RUN python -m venv /opt/qmd && /opt/qmd/bin/pip install .

FROM python:3.11-slim
RUN groupadd --system --gid 10001 qmd \
 && useradd --system --uid 10001 --gid qmd --create-home --home-dir /home/qmd qmd \
 && mkdir -p /data /docs \
 && chown qmd:qmd /data
COPY --from=build /opt/qmd /opt/qmd
ENV PATH=/opt/qmd/bin:$PATH \
    HOME=/home/qmd \
    INDEX_PATH=/data/index.sqlite \
    QMD_CONFIG_DIR=/data/config \
    XDG_CACHE_HOME=/data/cache \
    PYTHONUNBUFFERED=1
USER qmd
WORKDIR /home/qmd
VOLUME ["/data"]
EXPOSE 8181
# /health from inside the container: a loopback Host, which the origin guard always admits.
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
  CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8181/health', timeout=4)"]
ENTRYPOINT ["qmd"]
# Listening on every interface needs an allow-list (QMD_ALLOWED_HOSTS / QMD_ALLOWED_ORIGINS)
# or a bearer token (QMD_HTTP_TOKEN): without one `qmd` refuses to start (docs/spec/http.md).
CMD ["mcp", "--surface", "ldims", "--http", "--host", "0.0.0.0", "--port", "8181"]
