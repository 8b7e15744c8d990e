# cloud-decoder serve in a container: docs/deployment.md (build, run, replicas, probes).
#
#   docker build -t semcodec-cloud .
#   docker run --rm -p 50051:50051 -p 9464:9464 -v semcodec-data:/data semcodec-cloud
#
# Settings come from flags appended to `docker run ... semcodec-cloud`, from
# SEMCODEC_SERVE_<NAME> variables, or from a TOML file (SEMCODEC_SERVE_CONFIG), as outside
# a container (docs/service.md). TLS and tokens: mount the files and point at them.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# CPU wheels of torch and torchvision (the pinned versions; the decoder needs no GPU);
# pass --build-arg TORCH_INDEX=https://download.pytorch.org/whl/cu126 for CUDA wheels
ARG TORCH_INDEX=https://download.pytorch.org/whl/cpu

# the repository root is the `semcodec` package (pyproject.toml: package-dir)
COPY . /tmp/semcodec
RUN pip install --extra-index-url "$TORCH_INDEX" /tmp/semcodec \
    && rm -rf /tmp/semcodec \
    && useradd --create-home --uid 10001 semcodec \
    && mkdir /data && chown semcodec /data

USER semcodec
WORKDIR /home/semcodec
VOLUME ["/data"]

# every setting can be overridden by a flag after the image name
ENV SEMCODEC_SERVE_LISTEN=0.0.0.0:50051 \
    SEMCODEC_SERVE_OUT=/data \
    SEMCODEC_SERVE_METRICS_LISTEN=0.0.0.0:9464

EXPOSE 50051 9464

# the standard gRPC health service (plaintext; with TLS use the load balancer's probe)
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
    CMD ["python", "-c", "import grpc, sys; from grpc_health.v1 import health_pb2 as h, health_pb2_grpc as g; ch = grpc.insecure_channel('127.0.0.1:50051'); sys.exit(0 if g.HealthStub(ch).Check(h.HealthCheckRequest(service='semcodec.v1.SemanticStream'), timeout=2).status == h.HealthCheckResponse.SERVING else 1)"]

# SIGTERM: NOT_SERVING, drain (--grace-s, 10 s), exit 0; give `docker stop -t 15`
STOPSIGNAL SIGTERM
ENTRYPOINT ["cloud-decoder", "serve"]
