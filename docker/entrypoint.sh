#!/bin/sh
# The commands benchdb's containers run, one role each (docker/compose.yml):
#   migrate  refuse an insecure configuration, apply migrations, load the
#            reference data; a one-shot service, so migrations run once and
#            not in every web or worker container
#   web      gunicorn (also what `manage.py serve` runs)
#   worker   a Celery worker (ingest and the other tasks: queue celery)
#   refresh  the Celery worker of the summary refresh alone (its own queue,
#            one at a time, so ingest never waits behind it); run one
#   beat     Celery beat (the periodic public dump); run exactly one
#   manage   any manage.py command, e.g. `manage create_api_token`
# Anything else is run as given.  The test suite runs these same commands
# without Docker (tests/deploy/test_entrypoint.py).
set -eu
cd "$(dirname "$0")/.."

role="${1:-web}"
[ "$#" -gt 0 ] && shift

case "$role" in
migrate)
    python manage.py check --deploy
    python manage.py migrate --noinput
    if python manage.py help load_reference >/dev/null 2>&1; then
        python manage.py load_reference
    fi
    ;;
web)
    # Sync workers, 2 x cores + 1 of them: the serving model measured best
    # at 8 and 32 clients at once (bench/README.md, "Serving model"; threads
    # lengthened the slowest answers, the GIL serialising a process's
    # requests).  `manage.py serve` runs this same line.  --preload imports
    # the app once, before the workers fork: five workers booting Django at
    # once on two busy cores took minutes.  --max-requests bounds a slow
    # leak; the jitter keeps workers from restarting together.  10,000, not
    # 1,000: at 1,300-1,500 requests/s a worker lived 4 s, and 32 clients'
    # p99 on browse was 76-84 ms against 26-29 (bench/README.md, "First
    # requests"); each worker's caches are bounded by their budgets.
    exec python -m gunicorn benchdb.wsgi:application \
        --bind "${GUNICORN_BIND:-0.0.0.0:8000}" \
        --workers "${WEB_CONCURRENCY:-$((2 * $(nproc) + 1))}" \
        --preload \
        --timeout "${GUNICORN_TIMEOUT:-60}" \
        --forwarded-allow-ips "${FORWARDED_ALLOW_IPS:-127.0.0.1}" \
        --max-requests 10000 --max-requests-jitter 1000 \
        --access-logfile - --error-logfile - \
        "$@"
    ;;
worker)
    # A pool process is replaced after 100 tasks: its memory grows with the
    # bundles it parsed (140 -> 188 MB over 1,215 ingests).  Only the default
    # queue (ingest and the other tasks): the summary refresh is the
    # refresh role's, so the two never compete for one pool.
    exec python -m celery -A benchdb worker \
        --loglevel "${LOG_LEVEL:-INFO}" \
        --queues celery \
        --concurrency "${CELERY_WORKER_CONCURRENCY:-2}" \
        --max-tasks-per-child "${CELERY_WORKER_MAX_TASKS_PER_CHILD:-100}" \
        --hostname "worker@%h" \
        "$@"
    ;;
refresh)
    exec python -m celery -A benchdb worker \
        --loglevel "${LOG_LEVEL:-INFO}" \
        --queues refresh \
        --concurrency 1 \
        --hostname "refresh@%h" \
        "$@"
    ;;
beat)
    exec python -m celery -A benchdb beat \
        --loglevel "${LOG_LEVEL:-INFO}" \
        "$@"
    ;;
manage)
    exec python manage.py "$@"
    ;;
*)
    exec "$role" "$@"
    ;;
esac
