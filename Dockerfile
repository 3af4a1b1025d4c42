# The image of docker-compose.yml: the package with all its extras (Celery, PostgreSQL, HTTP, OpenAI) and Flower,
# then the example fleet (examples/fleet, its Celery app with install(app)) and its deployment helpers
# (examples/deploy) in /app, the working directory, where `celery -A fleet` and `alma-schedule -A fleet` find them.
# Run as an unprivileged user.
FROM python:3.11-slim
WORKDIR /src
COPY pyproject.toml README.md ./
COPY alma_schedule ./alma_schedule
RUN pip install --no-cache-dir ".[all]" flower \
    && useradd --create-home alma
WORKDIR /app
COPY examples/fleet ./fleet
COPY examples/deploy ./deploy
USER alma
CMD ["alma-schedule", "-A", "fleet", "--help"]
