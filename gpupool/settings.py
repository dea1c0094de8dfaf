"""gpupool settings: one module, driven by the environment.

With nothing set, gpupool runs embedded: SQLite in the project folder, no broker (the
scheduling loop runs in-process) and the simulated cluster. ``DATABASE_URL``, ``REDIS_URL``
and ``GPUPOOL_CLUSTER=kubernetes`` (with ``GPUPOOL_KUBECONFIG``) switch to the real path.
"""

from __future__ import annotations

import os
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent

_TRUE = {"1", "true", "yes", "on"}
_DEV_SECRET_KEY = "gpupool-development-key-not-for-production"  # noqa: S105 - refused below


def env_bool(name: str, default: bool) -> bool:
    """Read a boolean environment variable ("1", "true", "yes", "on" are true)."""
    value = os.environ.get(name)
    return default if value is None else value.strip().lower() in _TRUE


def env_list(name: str, default: str) -> list[str]:
    """Read a comma-separated environment variable into a list of non-empty items."""
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


# Development defaults are on unless DEBUG=0: `make demo` needs no configuration at all.
DEBUG = env_bool("DEBUG", True)
SECRET_KEY = os.environ.get("SECRET_KEY", _DEV_SECRET_KEY)
if not DEBUG and SECRET_KEY == _DEV_SECRET_KEY:
    raise ImproperlyConfigured("SECRET_KEY must be set when DEBUG is off (production settings).")
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", "127.0.0.1,localhost,testserver")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_htmx",
    "gpupool.api",
    "gpupool.cli",
    "gpupool.audit",
    "gpupool.tenancy",
    "gpupool.inventory",
    "gpupool.quotas",
    "gpupool.workloads",
    "gpupool.accounting",
    "gpupool.control",
    "gpupool.notifications",
    "gpupool.dashboard",
    "gpupool.simcluster",
    "gpupool.utilization",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "gpupool.urls"
WSGI_APPLICATION = "gpupool.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "gpupool.dashboard.context.dashboard",
            ],
        },
    },
]

DATABASES = {
    "default": dj_database_url.config(
        default=f"sqlite:///{BASE_DIR / 'db.sqlite3'}",
        conn_max_age=int(os.environ.get("DATABASE_CONN_MAX_AGE", "60")),
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # The demo's processes (web server, control loop, workload generator) share one file:
    # WAL lets readers go on while one writes, IMMEDIATE transactions take the write lock
    # at BEGIN (a deferred one that later writes can fail at once on another's lock), and a
    # writer waits up to 20 s for the lock.
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {
            "init_command": "PRAGMA journal_mode=WAL;",
            "transaction_mode": "IMMEDIATE",
            "timeout": 20,
        }
    )
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
# The pages' own stylesheet and scripts (frontend/, no build step) under static/dashboard/;
# plotly.js and htmx come from their wheels (plotly's package data, django-htmx's static).
STATICFILES_DIRS = [("dashboard", BASE_DIR / "frontend")]
STATICFILES_FINDERS = [
    "django.contrib.staticfiles.finders.FileSystemFinder",
    "django.contrib.staticfiles.finders.AppDirectoriesFinder",
    "gpupool.dashboard.finders.PlotlyFinder",
]
if not DEBUG:
    # Production serves collected static files itself (run `manage.py collectstatic` first);
    # in development runserver serves them from the finders.
    MIDDLEWARE.insert(1, "whitenoise.middleware.WhiteNoiseMiddleware")

# The dashboard's own login takes every user (the admin site's takes staff only).
LOGIN_URL = "dashboard:login"
LOGIN_REDIRECT_URL = "dashboard:home"
LOGOUT_REDIRECT_URL = "dashboard:login"

REST_FRAMEWORK = {
    "DEFAULT_SCHEMA_CLASS": "gpupool.api.schema.ApiSchema",  # documents the error answers
    # The token class first: its WWW-Authenticate header makes an anonymous call a 401.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "gpupool.api.authentication.BearerTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_FILTER_BACKENDS": [
        "gpupool.api.filters.StrictFilterBackend",
        "gpupool.api.filters.StrictOrderingFilter",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["gpupool.api.permissions.ActionRoles"],
    "DEFAULT_PAGINATION_CLASS": "gpupool.api.pagination.Pages",
    "EXCEPTION_HANDLER": "gpupool.api.errors.api_exception_handler",
    # JSON nested deeper than a bound is a 400, not a RecursionError (gpupool/api/parsers.py).
    "DEFAULT_PARSER_CLASSES": [
        "gpupool.api.parsers.BoundedJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    # An unknown ?format= is a 406 naming the formats offered, not DRF's 404.
    "DEFAULT_CONTENT_NEGOTIATION_CLASS": "gpupool.api.negotiation.Negotiation",
    "DEFAULT_RENDERER_CLASSES": [
        "rest_framework.renderers.JSONRenderer",
        "rest_framework.renderers.BrowsableAPIRenderer",
    ],
}
SPECTACULAR_SETTINGS = {
    "TITLE": "gpupool API",
    "DESCRIPTION": "Submit and track GPU workloads, govern quota and budgets, read cost.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    # Swagger UI from the drf-spectacular-sidecar wheel: the docs work offline, no CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    # Choice sets that share a field name get a name of their own.
    "ENUM_NAME_OVERRIDES": {
        "QuotaRequestKindEnum": "gpupool.quotas.choices.QuotaRequestKind",
        # a request's list and detail serializers share it (``quotas.requests_api``)
        "QuotaRequestStateEnum": "gpupool.quotas.choices.QuotaRequestState",
        "NotificationKindEnum": "gpupool.notifications.choices.NotificationKind",
        "WorkloadStateEnum": "gpupool.workloads.choices.WorkloadState",
    },
}

# Broker: without REDIS_URL there is none and the scheduling loop runs in-process.
REDIS_URL = os.environ.get("REDIS_URL", "")
CELERY_BROKER_URL = REDIS_URL or "memory://"
CELERY_RESULT_BACKEND = None
CELERY_TASK_ALWAYS_EAGER = not REDIS_URL
CELERY_TIMEZONE = "UTC"
CELERY_TASK_ACKS_LATE = False  # a cycle lost with its worker is simply the next beat's
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# The loop's tasks (the cycle, and the estimated starts that reuse its latest snapshot) go to a
# queue of their own, taken by one worker process (`celery -A gpupool worker -Q cycle
# --concurrency 1`, docs/operations.md): the loop's state stays in that process from cycle to
# cycle, and a cycle never waits behind a what-if replay or a roll-up, which other workers take
# from Celery's default queue.
GPUPOOL_CYCLE_QUEUE = "cycle"
CELERY_TASK_ROUTES = {"gpupool.control.*": {"queue": GPUPOOL_CYCLE_QUEUE}}

# The scheduling loop: a cycle every GPUPOOL_CYCLE_INTERVAL_S (beat with a broker, a timer in
# `gpupool loop` without), one at a time cluster-wide; one past GPUPOOL_CYCLE_TIME_LIMIT_S is
# stopped (and the next starts over).
GPUPOOL_CYCLE_INTERVAL_S = float(os.environ.get("GPUPOOL_CYCLE_INTERVAL_S", "5"))
GPUPOOL_CYCLE_TIME_LIMIT_S = float(os.environ.get("GPUPOOL_CYCLE_TIME_LIMIT_S", "120"))
# `gpupool loop` also starts a cycle when the cluster's pods change (a pod made with kubectl, a
# pod bound or ended) instead of waiting out the interval: GPUPOOL_CYCLE_BATCH_S after the last
# cycle started, never sooner than GPUPOOL_CYCLE_QUIET_S after the change, and as soon as new
# pods have paused (GPUPOOL_CYCLE_QUIET_S, and GPUPOOL_CYCLE_PAUSE_GAPS of their mean gaps): a
# burst in few cycles, its end at once (docs/control-loop.md, "Running it"). More pause gaps:
# fewer cycles when the clients making pods stall now and then, a later cycle at the real end.
GPUPOOL_CYCLE_ON_CHANGE = env_bool("GPUPOOL_CYCLE_ON_CHANGE", True)
GPUPOOL_CYCLE_BATCH_S = float(os.environ.get("GPUPOOL_CYCLE_BATCH_S", "0.5"))
GPUPOOL_CYCLE_QUIET_S = float(os.environ.get("GPUPOOL_CYCLE_QUIET_S", "0.05"))
GPUPOOL_CYCLE_PAUSE_GAPS = float(os.environ.get("GPUPOOL_CYCLE_PAUSE_GAPS", "6"))
# `gpupool loop` hands a cycle's bindings on to a thread of their own: the next cycle syncs and
# plans while they are in flight, and records their outcome before its own (docs/control-loop.md
# "The pipeline"; only on a backend that allows it: Kubernetes). Off: each cycle waits for them.
GPUPOOL_APPLY_PIPELINE = env_bool("GPUPOOL_APPLY_PIPELINE", True)
# The cost reports' roll-up: every GPUPOOL_ROLL_UP_INTERVAL_S (beat with a broker, between cycles
# in `gpupool loop` without), up to the last hour finished on the cluster's clock.
GPUPOOL_ROLL_UP_INTERVAL_S = float(os.environ.get("GPUPOOL_ROLL_UP_INTERVAL_S", "60"))
# The utilisation sampler's activity windows are kept this many days, then deleted (only once
# rolled up) in bounded batches every GPUPOOL_ACTIVITY_PRUNE_INTERVAL_S (beat with a broker,
# between cycles in `gpupool loop` without).
GPUPOOL_ACTIVITY_RETENTION_DAYS = float(os.environ.get("GPUPOOL_ACTIVITY_RETENTION_DAYS", "35"))
GPUPOOL_ACTIVITY_PRUNE_INTERVAL_S = float(
    os.environ.get("GPUPOOL_ACTIVITY_PRUNE_INTERVAL_S", "3600")
)
# The cycle log (a row per scheduling cycle, every few seconds) is kept whole this many days;
# older hours are thinned by the same retention run to the cycle per hour that the charts over
# time read (control.actions.do_thin_cycles).
GPUPOOL_CYCLE_RETENTION_DAYS = float(os.environ.get("GPUPOOL_CYCLE_RETENTION_DAYS", "7"))
CELERY_BEAT_SCHEDULE: dict[str, dict[str, object]] = {
    "scheduling-cycle": {
        "task": "gpupool.control.run_cycle",
        "schedule": GPUPOOL_CYCLE_INTERVAL_S,
        "options": {"expires": GPUPOOL_CYCLE_INTERVAL_S},
    },
    "usage-roll-up": {
        "task": "gpupool.accounting.roll_up_usage",
        "schedule": GPUPOOL_ROLL_UP_INTERVAL_S,
        "options": {"expires": GPUPOOL_ROLL_UP_INTERVAL_S},
    },
    "activity-retention": {
        "task": "gpupool.utilization.prune_activity",
        "schedule": GPUPOOL_ACTIVITY_PRUNE_INTERVAL_S,
        "options": {"expires": GPUPOOL_ACTIVITY_PRUNE_INTERVAL_S},
    },
    # Positions come with each cycle; estimated starts (a replay) once a minute, off the cycle.
    "estimated-starts": {
        "task": "gpupool.control.refresh_estimates",
        "schedule": 60.0,
        "options": {"expires": 60.0},
    },
}

# Mail (notifications): printed to the console unless EMAIL_BACKEND says otherwise, e.g.
# django.core.mail.backends.smtp.EmailBackend with EMAIL_HOST, EMAIL_PORT, EMAIL_HOST_USER,
# EMAIL_HOST_PASSWORD and EMAIL_USE_TLS. GPUPOOL_BASE_URL makes the links in mails absolute.
EMAIL_BACKEND = os.environ.get("EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend")
DEFAULT_FROM_EMAIL = os.environ.get("DEFAULT_FROM_EMAIL", "gpupool@localhost")
EMAIL_HOST = os.environ.get("EMAIL_HOST", "localhost")
EMAIL_PORT = int(os.environ.get("EMAIL_PORT", "25"))
EMAIL_HOST_USER = os.environ.get("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = os.environ.get("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)
EMAIL_TIMEOUT = int(os.environ.get("EMAIL_TIMEOUT", "10"))
GPUPOOL_BASE_URL = os.environ.get("GPUPOOL_BASE_URL", "")

# Cluster backend: "simulated" (embedded default) or "kubernetes".
GPUPOOL_CLUSTER = os.environ.get("GPUPOOL_CLUSTER", "simulated")
if GPUPOOL_CLUSTER not in {"simulated", "kubernetes"}:
    raise ImproperlyConfigured(
        f"GPUPOOL_CLUSTER must be 'simulated' or 'kubernetes', not {GPUPOOL_CLUSTER!r}."
    )
GPUPOOL_KUBECONFIG = os.environ.get("GPUPOOL_KUBECONFIG") or os.environ.get("KUBECONFIG", "")
# The Kubernetes backend's client-side limit on the requests it starts (a token bucket, as
# client-go's): kube-scheduler's defaults, 50 a second on average and 100 at once; 0 lifts it.
try:
    GPUPOOL_KUBE_API_QPS = float(os.environ.get("GPUPOOL_KUBE_API_QPS", "50"))
    GPUPOOL_KUBE_API_BURST = int(os.environ.get("GPUPOOL_KUBE_API_BURST", "100"))
except ValueError as _error:
    raise ImproperlyConfigured(
        f"GPUPOOL_KUBE_API_QPS must be a number and GPUPOOL_KUBE_API_BURST a whole number: {_error}"
    ) from _error
if GPUPOOL_KUBE_API_QPS < 0 or GPUPOOL_KUBE_API_BURST < 1:
    raise ImproperlyConfigured(
        "GPUPOOL_KUBE_API_QPS must be >= 0 (0: no limit) and GPUPOOL_KUBE_API_BURST >= 1, "
        f"not {GPUPOOL_KUBE_API_QPS} and {GPUPOOL_KUBE_API_BURST}."
    )
# How many bindings (and Events) the Kubernetes backend keeps in flight at once, each still
# waiting for the limit's token: a binding waits a round trip on the API server (0.1-0.5 s on
# a loaded one), and a cycle's hundreds of them should not queue behind a few workers.
try:
    GPUPOOL_KUBE_BIND_WORKERS = int(os.environ.get("GPUPOOL_KUBE_BIND_WORKERS", "64"))
except ValueError as _error:
    raise ImproperlyConfigured(
        f"GPUPOOL_KUBE_BIND_WORKERS must be a whole number: {_error}"
    ) from _error
if GPUPOOL_KUBE_BIND_WORKERS < 1:
    raise ImproperlyConfigured(
        f"GPUPOOL_KUBE_BIND_WORKERS must be >= 1, not {GPUPOOL_KUBE_BIND_WORKERS}."
    )
# The simulated cluster's clock: simulated seconds per wall-clock second (60: an hour a minute).
GPUPOOL_SIM_SPEED = float(os.environ.get("GPUPOOL_SIM_SPEED", "1"))
# The function that builds each backend (control/backends.py): a table, not a branch.
GPUPOOL_CLUSTER_BACKENDS = {
    "kubernetes": "gpupool.control.backends.kubernetes_backend",
    "simulated": os.environ.get(
        "GPUPOOL_SIMULATED_BACKEND", "gpupool.simcluster.store.backend_from_settings"
    ),
}

# GPU use against allocation (docs/utilization.md). GPUPOOL_PROMETHEUS_URL points at a
# Prometheus that scrapes NVIDIA's DCGM exporter; without it the simulated cluster draws its
# own, and a Kubernetes cluster has none. The source is chosen from a table, not a branch.
GPUPOOL_PROMETHEUS_URL = os.environ.get("GPUPOOL_PROMETHEUS_URL", "")
GPUPOOL_UTILIZATION_SOURCE = os.environ.get(
    "GPUPOOL_UTILIZATION_SOURCE",
    "prometheus" if GPUPOOL_PROMETHEUS_URL else GPUPOOL_CLUSTER,
)
GPUPOOL_UTILIZATION_SOURCES = {
    "prometheus": "gpupool.utilization.sampling.prometheus_source",
    "simulated": "gpupool.utilization.sampling.simulated_source",
    "kubernetes": "gpupool.utilization.sampling.no_source",
    "none": "gpupool.utilization.sampling.no_source",
}
# How often the loop reads the source (one window each time) and the step of its queries.
GPUPOOL_UTILIZATION_INTERVAL_S = float(os.environ.get("GPUPOOL_UTILIZATION_INTERVAL_S", "60"))
GPUPOOL_UTILIZATION_STEP_S = float(os.environ.get("GPUPOOL_UTILIZATION_STEP_S", "15"))
# A GPU-step below this utilisation (percent) is idle.
GPUPOOL_IDLE_UTILIZATION_PERCENT = float(os.environ.get("GPUPOOL_IDLE_UTILIZATION_PERCENT", "1"))
# Activity windows' retention: GPUPOOL_ACTIVITY_RETENTION_DAYS, beside the roll-up above.

# Accounting: days and months of the cost reports are counted in this IANA time zone.
GPUPOOL_ACCOUNTING_TZ = os.environ.get("GPUPOOL_ACCOUNTING_TZ", "UTC")
try:
    ZoneInfo(GPUPOOL_ACCOUNTING_TZ)
except (ZoneInfoNotFoundError, ValueError) as error:
    raise ImproperlyConfigured(
        f"GPUPOOL_ACCOUNTING_TZ must be an IANA time zone such as UTC or Europe/Paris, "
        f"not {GPUPOOL_ACCOUNTING_TZ!r}."
    ) from error

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
}
