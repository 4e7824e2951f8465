"""A cache-mode sweep: its run order, its modes paired by round, one link.

``benchdb-agent vm --cache-modes ...`` measures one VM disk in several cache
modes, in rounds (every mode once per round, each round in a fresh random
order); its guest runs and their host baseline share a ``sweep_id``, and
each guest run records its round and its place in the sweep.  The page
shows that order (so a reader sees the modes were interleaved, not run in
blocks), each mode against the reference mode (cache=none when measured)
paired round by round (``across.paired_by_round``), and links the ordinary
compare page on all the runs, the host baseline as the reference.
"""

from __future__ import annotations

from collections import defaultdict
from urllib.parse import urlencode

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse

from benchdb.results import across, hostcost, metrics
from benchdb.results.models import Result, Role, Run


def _compare_url(hosts: list[int], guests: list[int]) -> str:
    query = [("runs", ",".join(str(pk) for pk in hosts[:1] + guests))]
    if hosts:
        query.append(("ref", str(hosts[0])))
    return reverse("compare") + "?" + urlencode(query)


def by_round(runs: list[Run], results: list[dict]) -> list[dict]:
    """Per test and mode, the mode against the reference mode by round.

    ``runs`` are the sweep's guest runs, ``results`` rows of ``test_id``,
    ``run_id`` and the main figures' columns.  The reference is cache=none
    when the sweep measured it, else the first mode run.
    """
    modes = list(dict.fromkeys(r.cache_mode for r in runs))
    reference = "none" if "none" in modes else (modes[0] if modes else None)
    run_of = {r.pk: r for r in runs}
    figures = defaultdict(lambda: defaultdict(dict))  # test -> mode -> round
    for row in results:
        metric = metrics.main_metric(row["test_id"])
        run = run_of.get(row["run_id"])
        if metric not in metrics.METRIC_COLUMNS or run is None:
            continue
        value = row[metrics.METRIC_COLUMNS[metric]]
        if value is not None and run.sweep_round is not None:
            figures[(row["test_id"], metric)][run.cache_mode][run.sweep_round] = value
    out = []
    for (test_id, metric), per_mode in sorted(figures.items()):
        ref = per_mode.get(reference, {})
        for mode in modes:
            if mode == reference or mode not in per_mode:
                continue
            out.append(
                {
                    "test_id": test_id,
                    "metric": metric,
                    "higher_is_better": metrics.higher_is_better(metric),
                    "mode": mode,
                    "reference": reference,
                    **across.paired_by_round(ref, per_mode[mode]),
                }
            )
    return out


def host_cpu_by_round(runs: list[Run], costs: dict[int, dict]) -> list[dict]:
    """Per mode, host CPU µs per I/O by round, and against the reference
    mode paired by round (lower is better); [] when no run measured it."""
    per_mode = defaultdict(dict)
    for run in runs:
        cost = costs.get(run.pk) or {}
        if cost.get("us_per_io") and run.sweep_round is not None:
            per_mode[run.cache_mode][run.sweep_round] = cost["us_per_io"]
    if not per_mode:
        return []
    modes = list(dict.fromkeys(r.cache_mode for r in runs))
    reference = "none" if "none" in per_mode else next(iter(per_mode))
    return [
        {
            "mode": mode,
            "reference": reference,
            "us_per_io": sorted(per_mode[mode].items()),
            **(
                across.paired_by_round(per_mode[reference], per_mode[mode])
                if mode != reference
                else {}
            ),
        }
        for mode in modes
        if mode in per_mode
    ]


def sweep(request: HttpRequest, sweep_id: str) -> HttpResponse:
    runs = list(
        Run.objects.readable_by(request.user)
        .filter(sweep_id=sweep_id)
        .order_by("role", "sweep_position", "created", "id")
    )
    if not runs:
        raise Http404("no runs of this sweep that you may see")
    hosts = [r for r in runs if r.role == Role.HOST]
    guests = sorted(
        (r for r in runs if r.role != Role.HOST),
        key=lambda r: (r.sweep_position is None, r.sweep_position or 0, r.pk),
    )
    results = list(
        Result.objects.filter(run__in=[r.pk for r in guests]).values(
            "test_id", "run_id", *metrics.METRIC_COLUMNS.values()
        )
    )
    rounds = max((r.sweep_round or 0 for r in guests), default=0)
    context = {
        "sweep_id": sweep_id,
        "hosts": hosts,
        "guests": guests,
        "rounds": rounds,
        "interleaved": rounds > 0,
        "pairs": by_round(guests, results),
        "host_cpu": host_cpu_by_round(
            guests, {g.pk: hostcost.run_host_cost(g) for g in guests}
        ),
        "compare_url": _compare_url([h.pk for h in hosts], [g.pk for g in guests]),
    }
    return render(request, "web/sweep.html", context)
