# accelbench's own image: the in-cluster load generator (`accelbench loadgen`, run by the Job that
# `accelbench export` and the Kubernetes target render), and usable for any other accelbench command.
# Multi-architecture: build for amd64 and arm64 with `docker buildx build --platform linux/amd64,linux/arm64`.
#
#   docker build -t accelbench/accelbench:$(python -c "import tomllib;print(tomllib.load(open('pyproject.toml','rb'))['project']['version'])") .
#
# The load generator needs no engine and no GPU: only accelbench and its dependencies.

FROM python:3.11-slim AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY src ./src
# pip reads its index configuration from the build environment (PIP_INDEX_URL / PIP_EXTRA_INDEX_URL build args)
ARG PIP_INDEX_URL
ARG PIP_EXTRA_INDEX_URL
RUN python -m venv /opt/accelbench \
 && /opt/accelbench/bin/pip install --upgrade pip \
 && /opt/accelbench/bin/pip install .

FROM python:3.11-slim
LABEL org.opencontainers.image.title="accelbench" \
      org.opencontainers.image.description="Plan, deploy, measure and compare LLM serving on GPU, Neuron and CPU"
COPY --from=build /opt/accelbench /opt/accelbench
# the Job's pod security context runs as this user (runAsNonRoot, uid 10001)
RUN useradd --uid 10001 --create-home --shell /usr/sbin/nologin accelbench
USER 10001
ENV PATH=/opt/accelbench/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    ACCELBENCH_DATA_DIR=/home/accelbench/data \
    ACCELBENCH_CACHE_DIR=/home/accelbench/cache
WORKDIR /home/accelbench
ENTRYPOINT ["accelbench"]
CMD ["--help"]
