# mini-n8n: one image for the api and the workers (`command: api` / `command: worker`).
#
# The base is a build argument so the same file builds from the official slim image (users) and
# from a locally made Debian image (tests on machines without a registry: tests/compose).
# PIP_ARGS lets such a build install from wheels placed in ./wheels instead of PyPI, e.g.
#   --build-arg PIP_ARGS="--no-index --find-links /src/wheels"
#
# The api imports and activates the workflows in /app/workflows (mount yours there) at its start,
# and the bundled examples in /app/examples only with MINI_N8N_DEMO=true. It refuses to start
# without MINI_N8N_API_KEY (MINI_N8N_REQUIRE_API_KEY).
#
# Both processes run as the unprivileged `mini` (uid 10001), need no Linux capability and write
# nothing but scratch files in /tmp (no bytecode: PYTHONDONTWRITEBYTECODE, compiled at install),
# so docker-compose.yml runs them with cap_drop ALL, no-new-privileges, a read-only root and a
# tmpfs on /tmp.
ARG BASE_IMAGE=python:3.12-slim
FROM ${BASE_IMAGE}

ARG PIP_ARGS=""
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH \
    PORT=5678 \
    MINI_N8N_WORKFLOWS_DIR=/app/workflows \
    MINI_N8N_EXAMPLES_DIR=/app/examples \
    MINI_N8N_REQUIRE_API_KEY=true

RUN useradd --create-home --uid 10001 --shell /usr/sbin/nologin mini

# The exact versions the tests ran (requirements/run.lock, written by `make lock`), then the project.
COPY . /src
RUN python3 -m venv /opt/venv \
    && /opt/venv/bin/pip install --no-cache-dir --disable-pip-version-check $PIP_ARGS \
        -r /src/requirements/run.lock /src \
    && mkdir -p /app/workflows /app/examples \
    && cp /src/examples/workflows/*.json /app/examples/ \
    && rm -rf /src

USER mini
WORKDIR /app
EXPOSE 5678
# /healthz answers while the process is alive; slim images have no curl, so Python asks (with no
# spaces inside the argument: podman's Docker-compatible API splits healthcheck arguments).
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
    CMD ["python", "-c", "__import__('urllib.request').request.urlopen('http://127.0.0.1:'+__import__('os').environ.get('PORT','5678')+'/healthz',timeout=2)"]
ENTRYPOINT ["mini-n8n"]
CMD ["api"]
