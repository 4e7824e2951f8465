"""Many clients at once (``python -m bench --concurrency 8,32``).

For each serving model (``--serving-models``: gunicorn's worker class,
workers and threads) a real gunicorn is started on the bench database, and
for each URL and client count ``c``, ``c`` client threads each send one
request after another (a closed loop: a client waits for its answer before
it asks again) for ``--duration`` seconds.  Printed per URL: requests
answered per second, p50 and p99 of the time from sending a request to the
last byte of its answer (waiting in gunicorn's queue included), errors,
the server's RSS and the machine's load.

The URLs are what people open most: the browse page, a run page (a random
listed guest each request), the API's run list, and a comparison of 10
random listed guests (a new set each request: computed, as the long tail
meets it).  The clients run in this process (Python threads, about 0.3 ms
of CPU per request): on a 2-core machine they take a little of what the
server could use, the same for every model.
"""

from __future__ import annotations

import random
import threading
import time
from pathlib import Path

from bench import timing


def urls(ctx: dict) -> list[tuple[str, object]]:
    """(name, function of a random.Random giving a URL)."""
    guests = sorted(ctx["guests"])

    def run_page(rng):
        return f"/runs/{rng.choice(guests)}/"

    def compare(rng):
        runs = rng.sample(guests, min(10, len(guests)))
        return "/api/v1/compare/?runs=" + ",".join(map(str, runs))

    return [
        ("browse /runs/", lambda rng: "/runs/"),
        ("run page, random", run_page),
        ("API run list", lambda rng: "/api/v1/runs/"),
        ("API compare, 10 random runs", compare),
    ]


def hammer(server: timing.Server, url_of, clients: int, seconds: float, seed: int):
    """``clients`` threads asking ``url_of(rng)`` in a closed loop for
    ``seconds``: (latencies in s, errors, wall seconds until the last
    answer)."""
    latencies: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()
    start = time.perf_counter()
    deadline = start + seconds

    def client(index: int) -> None:
        rng = random.Random(seed * 1000 + index)
        while time.perf_counter() < deadline:
            url = url_of(rng)
            try:
                status, _size, elapsed = server.get(url)
            except OSError as exc:
                with lock:
                    errors.append(f"{url}: {exc}")
                continue
            with lock:
                latencies.append(elapsed)
                if status != 200:
                    errors.append(f"{url}: HTTP {status}")

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return latencies, errors, time.perf_counter() - start


def rss_mib(pid: int) -> float:
    """RSS of a process and its children (gunicorn's arbiter and workers)."""
    total = 0
    pids = timing.tree_pids(pid)
    for p in pids:
        try:
            status = Path(f"/proc/{p}/status").read_text()
        except OSError:
            continue
        total += int(status.split("VmRSS:")[1].split()[0])
    return total / 1024


def run(dsn: str, models: list, clients: list[int], args) -> list[str]:
    """Every serving model, URL and client count; the lines printed."""
    from bench import endpoints

    ctx = endpoints.pick_context()
    lines = []
    print(
        f"\nmany clients at once ({args.duration:g} s each; p50 and p99 of "
        "send-to-last-byte, queueing included):"
    )
    for model in models:
        server = timing.Server(dsn, serving=model)
        try:
            for name, url_of in urls(ctx):
                rng = random.Random(args.random_seed)
                for _ in range(3):  # warm-up: imports, connections, caches
                    server.get(url_of(rng))
                for c in clients:
                    lat, errors, wall = hammer(
                        server, url_of, c, args.duration, args.random_seed + c
                    )
                    p50 = timing.percentile(lat, 50) * 1000 if lat else 0
                    p99 = timing.percentile(lat, 99) * 1000 if lat else 0
                    line = (
                        f"{str(model):<13} {name:<28} c={c:<3} "
                        f"{len(lat) / wall:>7.1f} req/s  p50 {p50:>7.1f} ms  "
                        f"p99 {p99:>7.1f} ms  errors {len(errors)}  "
                        f"RSS {rss_mib(server.proc.pid):.0f} MiB  {timing.load()}"
                    )
                    if errors:
                        line += f"  (first: {errors[0][:120]})"
                    print(line, flush=True)
                    lines.append(line)
        finally:
            server.stop()
    return lines
