# The image of docker-compose.yml: the package with all its extras (Celery, PostgreSQL, HTTP, OpenAI), run as an
# unprivileged user.
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY alma_schedule ./alma_schedule
RUN pip install --no-cache-dir ".[all]" flower \
    && useradd --create-home alma
USER alma
CMD ["alma-schedule", "--help"]
