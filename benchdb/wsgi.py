"""WSGI entry point (gunicorn benchdb.wsgi)."""

import gc
import os

from django.core.wsgi import get_wsgi_application
from django.urls import get_resolver

from benchdb.ops import warm

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchdb.settings")
application = get_wsgi_application()
# Import every view now (and with them NumPy and SciPy), before the process
# takes a request: Django imports the URLconf on the first request, which
# made each gunicorn worker's first answer about 3 s slower than the rest.
URL_PATTERNS = get_resolver().url_patterns
# And what each worker's first request of a kind would build: the URL
# resolvers' reverse lookups, the compiled templates (benchdb/ops/warm.py).
WARMED = warm.warm_process()
# Then keep the ~140,000 objects of start-up out of the garbage collector's
# full passes, which otherwise land in the middle of some request and set
# the slowest answers' times (bench/README.md).
gc.freeze()
