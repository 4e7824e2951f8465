"""Health probes for the container health checks (docker/compose.yml).

``python -m benchdb.ops.probe http://127.0.0.1:8000/health/`` asks the running
web server, the way a load balancer would: with a Host header the site
accepts (the first name in ``ALLOWED_HOSTS``, since the container's own
address is not one of them) and ``X-Forwarded-Proto: https`` when a proxy is
trusted, so the answer is the page and not a 400 or a redirect.

``python -m benchdb.ops.probe --broker`` checks that this container reaches
the broker: the health of Celery beat, which has no ping of its own.

Exit status 0 when healthy, 1 otherwise, with the reason on stderr.
"""

from __future__ import annotations

import argparse
import os
import sys
import urllib.error
import urllib.request


def probe_host() -> str:
    """The Host header to send: the first concrete name in ALLOWED_HOSTS."""
    for host in os.environ.get("ALLOWED_HOSTS", "").split(","):
        host = host.strip().lstrip(".")
        if host and host != "*":
            return host
    return "localhost"


def probe_url(url: str, timeout: float) -> str | None:
    """None when ``url`` answers 200, else why not."""
    headers = {"Host": probe_host()}
    if os.environ.get("TRUST_X_FORWARDED_PROTO", "").lower() in ("1", "true", "yes"):
        headers["X-Forwarded-Proto"] = "https"
    request = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            if response.status != 200:
                return f"{url}: HTTP {response.status}"
    except urllib.error.HTTPError as exc:
        return f"{url}: HTTP {exc.code} {exc.read(500).decode(errors='replace')}"
    except OSError as exc:
        return f"{url}: {exc}"
    return None


def probe_broker() -> str | None:
    """None when the configured Celery broker accepts a connection."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchdb.settings")
    import django

    django.setup()
    from benchdb.ops.views import check_broker

    return check_broker()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("url", nargs="?", help="a URL that must answer 200")
    parser.add_argument("--broker", action="store_true", help="check the broker")
    parser.add_argument("--timeout", type=float, default=5.0)
    args = parser.parse_args(argv)
    if not args.url and not args.broker:
        parser.error("give a URL, --broker, or both")
    problems = []
    if args.url:
        problems.append(probe_url(args.url, args.timeout))
    if args.broker:
        problems.append(probe_broker())
    problems = [p for p in problems if p]
    for problem in problems:
        print(f"unhealthy: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
