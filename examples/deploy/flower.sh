#!/bin/sh
# Flower of docker-compose.yml: it refuses to start without basic auth instead of showing the fleet's
# tasks to anyone. Flower reads FLOWER_BASIC_AUTH (user:password) from the environment itself.
if [ -z "${FLOWER_BASIC_AUTH:-}" ]; then
    echo "error: FLOWER_BASIC_AUTH is empty: set it to user:password in .env (see .env.example); Flower does not start without auth" >&2
    exit 1
fi
exec celery -A fleet flower "$@"
