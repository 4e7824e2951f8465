"""Settings for benchdb, read from the environment (twelve-factor).

Every value has a development default that works on a fresh machine; production
sets the variables documented in docker/.env.example.  ``DATABASE_URL`` and
``CELERY_BROKER_URL`` fall back to the embedded PostgreSQL and the filesystem
broker (benchdb/embedded.py).
"""

import os
import sys
from pathlib import Path

import dj_database_url

from benchdb import embedded

BASE_DIR = Path(__file__).resolve().parent.parent


def envbool(name: str, default: str) -> bool:
    value = os.environ.get(name, default).strip().lower()
    if value not in ("1", "0", "true", "false", "yes", "no", "on", "off"):
        raise ValueError(f"{name}={value!r}: expected true or false")
    return value in ("1", "true", "yes", "on")


def envint(name: str, default: int) -> int:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"{name}={value!r}: expected a whole number") from None


def envlist(name: str, default: str) -> list[str]:
    return [v.strip() for v in os.environ.get(name, default).split(",") if v.strip()]


DEBUG = envbool("DEBUG", "false")
# Development key only; the deploy check (benchdb/ops/checks.py) refuses it
# when DEBUG is off.
INSECURE_SECRET_KEY = "dev-insecure-benchdb-secret-key-do-not-use-in-production"
SECRET_KEY = os.environ.get("SECRET_KEY") or INSECURE_SECRET_KEY
ALLOWED_HOSTS = envlist("ALLOWED_HOSTS", "127.0.0.1,localhost,[::1],testserver")
CSRF_TRUSTED_ORIGINS = envlist("CSRF_TRUSTED_ORIGINS", "")
SITE_URL = os.environ.get("SITE_URL", "http://127.0.0.1:8000").rstrip("/")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "benchdb.results",
    "benchdb.api",
    "benchdb.web",
    "benchdb.ops",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # Pages compress about tenfold (a full comparison: ~200 KB of HTML to
    # ~25 KB).  Django's GZip adds random bytes against BREACH (since 4.2);
    # WhiteNoise serves its own precompressed files untouched, and bodies
    # compressed already (the dump, the agent) are sent as they are.
    "benchdb.ops.compression.Compression",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "benchdb.web.middleware.content_security_policy",
    # API answers freed with their response (DRF's response and view form a
    # cycle): after rendering, so innermost.
    "benchdb.api.middleware.free_answers",
]
# With DEBUG on, the site's own 404 and 500 pages instead of Django's
# technical ones (benchdb/ops/errors.py); inside the others but free_answers.
if DEBUG:
    MIDDLEWARE.insert(-1, "benchdb.ops.errors.site_error_pages")

ROOT_URLCONF = "benchdb.urls"
WSGI_APPLICATION = "benchdb.wsgi.application"

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
                # After Django's csrf processor: a kept page's token is a
                # placeholder (benchdb/web/kept.py).
                "benchdb.web.kept.csrf_placeholder",
            ],
        },
    },
    # The rows of the long tables (the comparison's, the browse list's),
    # included by {% rows %} (web/templatetags/partials.py): Jinja2 wrote
    # them in a tenth of the Django engine's time.  Autoescape is on.
    {
        "BACKEND": "django.template.backends.jinja2.Jinja2",
        "DIRS": [BASE_DIR / "templates" / "jinja2"],
        "APP_DIRS": False,
        "OPTIONS": {"autoescape": True},
    },
]

# PostgreSQL only.  Without DATABASE_URL, the embedded server from pgserver.
# Seconds a web process keeps its connection between requests, on either:
# a new connection (and a new PostgreSQL backend) for every request was a
# large share of a page's fixed cost (bench/README.md, "Pages: the fixed
# cost").  Checked before reuse (CONN_HEALTH_CHECKS), so a restarted
# PostgreSQL costs no failed request.  0 closes it after each request: behind
# pgbouncer in transaction mode (docs/deploy.md, "Database connections").
DB_CONN_MAX_AGE = envint("DB_CONN_MAX_AGE", 600)
DATABASE_IS_EMBEDDED = not os.environ.get("DATABASE_URL")
if not DATABASE_IS_EMBEDDED:
    DATABASES = {
        "default": dj_database_url.parse(
            os.environ["DATABASE_URL"],
            conn_max_age=DB_CONN_MAX_AGE,
            conn_health_checks=True,
        )
    }
elif embedded.is_lifecycle_command(sys.argv):
    # ``manage.py embedded status|stop`` looks at the server: starting it
    # first would make "status" always say running.  It never connects.
    DATABASES = {"default": embedded.unstarted_settings()}
else:
    DATABASES = {
        "default": embedded.database_settings(
            conn_max_age=DB_CONN_MAX_AGE, conn_health_checks=True
        )
    }
if DATABASES["default"]["ENGINE"] != "django.db.backends.postgresql":
    raise ValueError("DATABASE_URL must point at PostgreSQL: benchdb uses no other")
# PostgreSQL's JIT compiles a query whose estimated cost passes
# ``jit_above_cost``: at a million results the browse page's facet counts
# spent a third of their time compiling, and no answer of the service or the
# worker's refresh was faster with it (docs/deploy.md).
# Off for benchdb's sessions; options in DATABASE_URL come after, so
# ``?options=-c%20jit%3Don`` turns it back on.
_OPTIONS = DATABASES["default"].setdefault("OPTIONS", {})
_OPTIONS["options"] = " ".join(["-c jit=off", _OPTIONS.get("options", "")]).strip()

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

_VALIDATORS = "django.contrib.auth.password_validation"
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": f"{_VALIDATORS}.UserAttributeSimilarityValidator"},
    {"NAME": f"{_VALIDATORS}.MinimumLengthValidator"},
    {"NAME": f"{_VALIDATORS}.CommonPasswordValidator"},
    {"NAME": f"{_VALIDATORS}.NumericPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "home"
# Django's password check behind the sign-in failure limits, on every
# sign-in path (the admin's too): benchdb/api/throttling.py.
AUTHENTICATION_BACKENDS = ["benchdb.api.throttling.LoginLimitBackend"]
# Password-reset mail: printed to the web process's output in development,
# sent over SMTP in production (EMAIL_HOST ...).
EMAIL_BACKEND = os.environ.get("EMAIL_BACKEND") or (
    "django.core.mail.backends.console.EmailBackend"
    if DEBUG
    else "django.core.mail.backends.smtp.EmailBackend"
)
EMAIL_HOST = os.environ.get("EMAIL_HOST", "localhost")
EMAIL_PORT = envint("EMAIL_PORT", 25)
EMAIL_HOST_USER = os.environ.get("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = os.environ.get("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = envbool("EMAIL_USE_TLS", "false")
DEFAULT_FROM_EMAIL = os.environ.get("DEFAULT_FROM_EMAIL", "benchdb <noreply@localhost>")

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = Path(os.environ.get("STATIC_ROOT") or BASE_DIR / "staticfiles")
# Chart.js and other front-end packages come from npm (package.json) and are
# served by benchdb itself from node_modules: no CDN.
STATICFILES_DIRS = [
    BASE_DIR / "static",
    ("vendor/chart.js", BASE_DIR / "node_modules" / "chart.js" / "dist"),
]
# Development serves static files straight from the finders; production runs
# collectstatic at image build time.
WHITENOISE_USE_FINDERS = envbool("WHITENOISE_USE_FINDERS", "true" if DEBUG else "false")
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": (
            "whitenoise.storage.CompressedManifestStaticFilesStorage"
            if envbool("STATIC_MANIFEST", "false")
            else "django.contrib.staticfiles.storage.StaticFilesStorage"
        )
    },
}

# Request bodies: an agent bundle with raw outputs of a full profile is a few
# MiB; the API refuses anything larger with a clear 413 (benchdb/api).
BUNDLE_MAX_BYTES = envint("BUNDLE_MAX_BYTES", 16 * 1024 * 1024)
DATA_UPLOAD_MAX_MEMORY_SIZE = BUNDLE_MAX_BYTES
ALLOW_ANONYMOUS_SUBMISSIONS = envbool("ALLOW_ANONYMOUS_SUBMISSIONS", "true")
# Comparisons call two figures "equivalent" when the whole 95% interval of
# their ratio lies within ±this many percent (benchdb/results/stats.py).
BENCHDB_EQUIVALENCE_PERCENT = envint("BENCHDB_EQUIVALENCE_PERCENT", 5)
# Comparisons each web process keeps computed, counted in run figures (a
# 10-run comparison of the standard profile has 831, 1.7 MiB in memory;
# 0 keeps none): benchdb/results/memo.py.
BENCHDB_COMPARISON_MEMO = envint("BENCHDB_COMPARISON_MEMO", 10000)
if BENCHDB_COMPARISON_MEMO < 0:
    raise ValueError(
        f"BENCHDB_COMPARISON_MEMO={BENCHDB_COMPARISON_MEMO}: expected a number "
        "of run figures, 0 (keep none) or more"
    )
# Pages each web process keeps as written for anonymous visitors (home,
# browse, the reports), in bytes of HTML (a page is 20 to 300 KB; 0 keeps
# none): benchdb/web/kept.py.
BENCHDB_PAGE_MEMO = envint("BENCHDB_PAGE_MEMO", 8 * 1024 * 1024)
if BENCHDB_PAGE_MEMO < 0:
    raise ValueError(
        f"BENCHDB_PAGE_MEMO={BENCHDB_PAGE_MEMO}: expected bytes, 0 (keep none) or more"
    )
# Lists count their runs up to this many, then say "more than" it with
# PostgreSQL's estimate (the API's count_capped and count_estimate, the
# browse page's "about"), so no request counts every run of a long list:
# benchdb/results/reads.py (bounded_count).
BENCHDB_COUNT_CAP = envint("BENCHDB_COUNT_CAP", 10000)
if BENCHDB_COUNT_CAP < 1:
    raise ValueError(f"BENCHDB_COUNT_CAP={BENCHDB_COUNT_CAP}: expected 1 or more")

# The API's throttles and the sign-in limits count in the cache: with several
# web processes they must share one (CACHE_URL=redis://...); without it each
# process counts on its own.  A Redis that cannot be reached degrades to that
# (with a logged warning) instead of failing requests: benchdb/ops/cache.py.
if os.environ.get("CACHE_URL"):
    CACHES = {
        "default": {
            "BACKEND": "benchdb.ops.cache.FailSoftRedisCache",
            "LOCATION": os.environ["CACHE_URL"],
        }
    }

REST_FRAMEWORK = {
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "benchdb.api.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PARSER_CLASSES": ["benchdb.api.parsers.BundleJSONParser"],
    # DRF's JSON written by orjson (api/renderers.py); the browsable API as
    # DRF has it.
    "DEFAULT_RENDERER_CLASSES": [
        "benchdb.api.renderers.FastJSONRenderer",
        "rest_framework.renderers.BrowsableAPIRenderer",
    ],
    "EXCEPTION_HANDLER": "benchdb.api.exceptions.handler",
    "DEFAULT_FILTER_BACKENDS": [
        "django_filters.rest_framework.DjangoFilterBackend",
        "rest_framework.filters.SearchFilter",
        "rest_framework.filters.OrderingFilter",
    ],
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.PageNumberPagination",
    "PAGE_SIZE": 50,
    # Anonymous API reads per client address; signed-in users and tokens are
    # not counted here (submissions and saves have their own throttles).
    "DEFAULT_THROTTLE_CLASSES": ["benchdb.api.throttling.AnonReadThrottle"],
    "DEFAULT_THROTTLE_RATES": {
        "submissions": os.environ.get("SUBMISSION_THROTTLE", "120/hour"),
        "anon": os.environ.get("ANON_THROTTLE", "2000/hour"),
        "comparisons": os.environ.get("COMPARISON_THROTTLE", "60/hour"),
        # Sign-ups and password-reset mails, per address.
        "accounts": os.environ.get("ACCOUNT_THROTTLE", "20/hour"),
    },
    "NUM_PROXIES": None,  # replaced below: benchdb.api.throttling.client_address
}
# The client address throttles count by (benchdb/api/throttling.py
# client_address; docs/deploy.md "Client address and throttles"):
# REMOTE_ADDR, unless the deployment names its proxies.  TRUSTED_PROXIES
# (addresses or networks, comma-separated) wins over NUM_PROXIES (how many
# proxies append to X-Forwarded-For in front of gunicorn).  Without either,
# X-Forwarded-For is ignored: a client could write anything there.
TRUSTED_PROXIES = envlist("TRUSTED_PROXIES", "")
NUM_PROXIES = envint("NUM_PROXIES", 0)
REST_FRAMEWORK["NUM_PROXIES"] = NUM_PROXIES
# Sign-in attempts: after LOGIN_FAILURE_LIMIT failures from one address or for
# one user name within LOGIN_FAILURE_WINDOW_S, the login page answers 429.
LOGIN_FAILURE_LIMIT = envint("LOGIN_FAILURE_LIMIT", 10)
LOGIN_FAILURE_WINDOW_S = envint("LOGIN_FAILURE_WINDOW_S", 900)
SPECTACULAR_SETTINGS = {
    "TITLE": "benchdb API",
    "DESCRIPTION": (
        "Comparable VM disk benchmarks. Units: bandwidth in bytes/s, latency in "
        "ns, IOPS in operations/s, sizes in bytes, durations in seconds."
    ),
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    # Swagger UI's files come from the sidecar package, served by benchdb.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}

# Celery.  Without CELERY_BROKER_URL, kombu's filesystem transport: a real
# worker over a broker that needs no server.
if os.environ.get("CELERY_BROKER_URL"):
    CELERY_BROKER_URL = os.environ["CELERY_BROKER_URL"]
    CELERY_BROKER_TRANSPORT_OPTIONS = {}
else:
    CELERY_BROKER_URL, CELERY_BROKER_TRANSPORT_OPTIONS = embedded.broker_settings()
    # kombu's filesystem transport, woken by its acks (benchdb/broker.py).
    CELERY_BROKER_TRANSPORT = "benchdb.broker:Transport"
# Task state lives on our own rows (Submission.status), not in a result backend.
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
# A task is acknowledged only after it finished, so a worker that dies mid-task
# leaves the message to be delivered again (ingest is idempotent).
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
# One message at a time per process: ingest tasks are long and uneven.
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# The summary refresh (seconds to minutes at a million results) has its own
# queue and its own worker process (`celery worker -Q refresh`, started by
# `manage.py serve` and a service of docker/compose.yml), so ingest never
# waits behind it; everything else is on the default queue, "celery".
CELERY_TASK_ROUTES = {
    "benchdb.results.refresh.refresh_summaries": {"queue": "refresh"},
}
# Publishing to a broker that is down fails within about a second instead of
# holding the upload request (Celery's default retries for much longer); used
# by every apply_async of ours (ingest, the summary refresh).
PUBLISH_RETRY_POLICY = {
    "max_retries": 2,
    "interval_start": 0,
    "interval_step": 0.3,
    "interval_max": 0.5,
}
# A stuck ingest must not hold a worker forever.
CELERY_TASK_TIME_LIMIT = envint("CELERY_TASK_TIME_LIMIT", 300)
CELERY_TASK_SOFT_TIME_LIMIT = CELERY_TASK_TIME_LIMIT - 30
# Redis hands a message a dead worker held to another one after this long
# (default: an hour); twice the time limit, so a live task is not redelivered.
if CELERY_BROKER_URL.startswith(("redis://", "rediss://")):
    CELERY_BROKER_TRANSPORT_OPTIONS.setdefault(
        "visibility_timeout", 2 * CELERY_TASK_TIME_LIMIT
    )
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
# Each worker process keeps its database connection across tasks, as a web
# process does across requests: Django's own rule (CONN_MAX_AGE, here
# WORKER_DB_CONN_MAX_AGE seconds; health checks; a connection that saw an
# error is dropped) applied at each task's start and end (benchdb/celery.py).
# Celery's Django fix-up otherwise closes it after every task (unless
# CELERY_DB_REUSE_MAX is set, which hands that rule to us): each ingest paid
# a new connection and a new PostgreSQL backend.  DB_CONN_MAX_AGE (0 behind
# pgbouncer) applies here too.
CELERY_DB_REUSE_MAX = 2**31
WORKER_DB_CONN_MAX_AGE = envint("WORKER_DB_CONN_MAX_AGE", DB_CONN_MAX_AGE)
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# The public dump for researchers (benchdb/results/tasks.py public_dump), run
# by `celery -A benchdb beat`; files under PUBLIC_DUMP_DIR (default var/dumps).
PUBLIC_DUMP_DIR = os.environ.get("PUBLIC_DUMP_DIR", "")
# Timestamped dumps kept beside latest.* (never one that holds a run taken
# out of the public set since it was written).
PUBLIC_DUMP_KEEP = envint("PUBLIC_DUMP_KEEP", 7)
# No stranded submission (benchdb/results/tasks.py requeue_stale, run by
# beat): a submission whose message never reached the broker is queued as soon
# as the broker answers; one still "processing" this long after its last
# change lost its worker (more than the task time limit, so a live task is
# never doubled); one "queued" this long after its message was sent lost it
# with the broker (a broker restarted without its queue): five minutes, far
# more than a submission waits in a queue that is being worked (a message
# still queued gets a second one, which finds the row done and returns).
# After SUBMISSION_MAX_ATTEMPTS the submission fails.  The
# upload answers 503 with Retry-After SUBMISSION_RETRY_AFTER_S when it could
# not queue.  docs/deploy.md, "Submissions".
SUBMISSION_REQUEUE_INTERVAL_S = envint("SUBMISSION_REQUEUE_INTERVAL_S", 60)
SUBMISSION_PROCESSING_STALE_AFTER_S = envint(
    "SUBMISSION_PROCESSING_STALE_AFTER_S", CELERY_TASK_TIME_LIMIT + 60
)
SUBMISSION_QUEUED_STALE_AFTER_S = envint("SUBMISSION_QUEUED_STALE_AFTER_S", 300)
SUBMISSION_MAX_ATTEMPTS = envint("SUBMISSION_MAX_ATTEMPTS", 5)
SUBMISSION_RETRY_AFTER_S = envint("SUBMISSION_RETRY_AFTER_S", 60)
CELERY_BEAT_SCHEDULE = {
    "public-dump": {
        "task": "benchdb.results.tasks.public_dump",
        "schedule": envint("PUBLIC_DUMP_INTERVAL_S", 24 * 3600),
    },
    # The dump written again when a run left the public set since it was
    # read (deleted, hidden, made private); until then /api/v1/dump/ leaves
    # that run out as it serves the file.
    "refresh-dump": {
        "task": "benchdb.results.tasks.refresh_dump",
        "schedule": envint("PUBLIC_DUMP_CHECK_INTERVAL_S", 60),
    },
    "requeue-stale-submissions": {
        "task": "benchdb.results.tasks.requeue_stale",
        "schedule": SUBMISSION_REQUEUE_INTERVAL_S,
    },
    # The stored across-runs answers (benchdb/results/refresh.py): queued a
    # few seconds after each ingest and moderation; beat is the backstop.
    "refresh-summaries": {
        "task": "benchdb.results.refresh.refresh_summaries",
        "schedule": envint("SUMMARY_REFRESH_INTERVAL_S", 600),
    },
}
SUMMARY_REFRESH_DELAY_S = envint("SUMMARY_REFRESH_DELAY_S", 5)
SUMMARY_REFRESH_MAX = envint("SUMMARY_REFRESH_MAX", 500)
# beat keeps its last-run times in a file; not in the working directory.
CELERY_BEAT_SCHEDULE_FILENAME = os.environ.get(
    "CELERY_BEAT_SCHEDULE_FILENAME", str(embedded.var_dir() / "celerybeat-schedule")
)

# Production security.  With DEBUG off, cookies are Secure and HSTS is sent
# (browsers ignore it over http, and Django only sends it on https requests).
# The redirect to https is off unless asked: TLS usually ends at a proxy in
# front of gunicorn, and `make run` and the test suite speak plain http.  The
# deploy check (`manage.py check --deploy`, benchdb/ops/checks.py) names what
# is missing.  docker/.env.example turns the redirect and the proxy header on.
SECURE_SSL_REDIRECT = envbool("SECURE_SSL_REDIRECT", "false")
# The compose health checks call /health/ over plain http inside the network.
SECURE_REDIRECT_EXEMPT = [r"^health/$"]
# Only behind a proxy that sets X-Forwarded-Proto itself (and strips a
# client's): otherwise a client could claim https.
if envbool("TRUST_X_FORWARDED_PROTO", "false"):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SESSION_COOKIE_SECURE = envbool("SESSION_COOKIE_SECURE", "false" if DEBUG else "true")
CSRF_COOKIE_SECURE = envbool("CSRF_COOKIE_SECURE", "false" if DEBUG else "true")
SECURE_HSTS_SECONDS = envint("SECURE_HSTS_SECONDS", 0 if DEBUG else 31536000)
SECURE_HSTS_INCLUDE_SUBDOMAINS = envbool("SECURE_HSTS_INCLUDE_SUBDOMAINS", "false")
SECURE_HSTS_PRELOAD = envbool("SECURE_HSTS_PRELOAD", "false")
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
SESSION_COOKIE_HTTPONLY = True

# Logs go to stdout (the container runtime collects them); LOG_FORMAT=json
# writes one JSON object a line for a log pipeline.
LOG_FORMAT = os.environ.get("LOG_FORMAT", "plain")
if LOG_FORMAT not in ("plain", "json"):
    raise ValueError(f"LOG_FORMAT={LOG_FORMAT!r}: expected plain or json")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"},
        "json": {"()": "benchdb.ops.logformat.JSONFormatter"},
    },
    "handlers": {
        "stdout": {
            "class": "logging.StreamHandler",
            "stream": sys.stdout,
            "formatter": LOG_FORMAT,
        }
    },
    "root": {"handlers": ["stdout"], "level": os.environ.get("LOG_LEVEL", "INFO")},
}
