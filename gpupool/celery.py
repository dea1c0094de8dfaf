"""The Celery application: ``celery -A gpupool worker`` and ``celery -A gpupool beat``.

Its settings are Django's ``CELERY_*`` (broker ``REDIS_URL``; the beat schedule, which runs
the scheduling cycle every ``GPUPOOL_CYCLE_INTERVAL_S`` and the usage roll-up every
``GPUPOOL_ROLL_UP_INTERVAL_S``); tasks are found in each app's
``tasks.py``. ``gpupool/__init__.py`` stays empty: importing the decision core must not pull
in Celery.
"""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpupool.settings")

app = Celery("gpupool")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
