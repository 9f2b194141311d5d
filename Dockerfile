# One image for every toolfleet process: workers, the orchestrator and Flower (compose.yaml).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# .dockerignore lets in only the package sources and the example agents: no .env, no
# virtualenv, no tests. `toolfleet/` links to orchestrator/, workers/ and shared/; the
# wheel built from them installs the one import name `toolfleet`.
WORKDIR /src
COPY . .
RUN pip install ".[flower,otel,mcp]"

# The agents and tools the processes load by module name (TOOLFLEET_TOOL_MODULES,
# --agent module:attribute) live apart from the package: here the examples; mount or
# copy your own modules into /srv/agents.
RUN mkdir -p /srv/agents && cp -r /src/examples /srv/agents/examples
ENV PYTHONPATH=/srv/agents

# Run as an unprivileged user, from a directory without the sources (the installed
# package is what runs). Secrets come from the environment at run time, never the image.
RUN useradd --create-home --uid 10001 toolfleet
USER toolfleet
WORKDIR /home/toolfleet

CMD ["toolfleet", "--help"]
