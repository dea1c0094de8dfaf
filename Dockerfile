# gpupool's production image. One image, every role (docker-compose.yml, deploy/kubernetes,
# docs/operations.md): the web app under gunicorn, the Celery worker that runs the scheduling
# cycle, the Celery worker of the other tasks, Celery beat that triggers them, and migrate.
#   docker build -t gpupool .
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    # The checkout in /app is what runs: settings find templates/ and staticfiles/ beside it.
    PYTHONPATH=/app \
    DJANGO_SETTINGS_MODULE=gpupool.settings

WORKDIR /app
COPY . .
RUN pip install .

# Static files are collected at build time and served by whitenoise (DEBUG=0). The key is a
# placeholder that only this step sees: settings refuse to start without one when DEBUG=0.
RUN DEBUG=0 SECRET_KEY=collectstatic-only python manage.py collectstatic --noinput

RUN useradd --system --uid 10001 --home-dir /app gpupool
USER gpupool
EXPOSE 8000
CMD ["gunicorn", "gpupool.wsgi", "--bind", "0.0.0.0:8000", "--workers", "3", "--access-logfile", "-"]
