# One image for every toolfleet process: workers, the orchestrator and Flower (compose.yaml).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# .dockerignore lets in only the package sources: no .env, no virtualenv, no tests.
WORKDIR /src
COPY . .
RUN pip install ".[flower]"

# Run as an unprivileged user, from a directory without the sources (the installed
# package is what runs). Secrets come from the environment at run time, never the image.
RUN useradd --create-home --uid 10001 toolfleet
USER toolfleet
WORKDIR /home/toolfleet

CMD ["toolfleet", "--help"]
