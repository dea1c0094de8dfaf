# gpupool's production image. One image, every role (docker-compose.yml, deploy/kubernetes,
# docs/operations.md): the web app under gunicorn, the Celery worker that runs the scheduling
# cycle, the Celery worker of the other tasks, Celery beat that triggers them, and migrate.
#   docker build -t gpupool .

# The decision core compiled to C with mypyc (gpupool/scheduler/native.py), as `make native`
# builds it: in a stage with a C compiler and the `native` tools, of which the image keeps only
# the build. Without it the image would run the core as plain Python, about three times
# slower a cycle (docs/benchmarks.md, B1). The build's key hashes the core's sources and the
# interpreter's ABI (cpython-311, Debian 12 on both stages), and the image loads it from
# /app/build/native; `--require` fails the image's build rather than ship it uncompiled.
FROM python:3.11 AS native-core
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /app
COPY . .
RUN pip install ".[native]" && python hack/build_native.py --require

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
COPY --from=native-core /app/build/native build/native
RUN pip install .

# Static files are collected at build time and served by whitenoise (DEBUG=0). The key is a
# placeholder that only this step sees: settings refuse to start without one when DEBUG=0.
RUN DEBUG=0 SECRET_KEY=collectstatic-only python manage.py collectstatic --noinput

RUN useradd --system --uid 10001 --home-dir /app gpupool
USER gpupool
EXPOSE 8000
CMD ["gunicorn", "gpupool.wsgi", "--bind", "0.0.0.0:8000", "--workers", "3", "--access-logfile", "-"]
