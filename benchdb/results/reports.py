"""The reports' direct answers, from the across-runs statistics.

"Which cache mode should I use on my host with these disks?" and "how much
do I lose in a VM against bare metal?" for the setup a reader picks
(platform, disk type, storage, bus, workload): each answer is
``results.population``'s figure with its interval, the number of systems and
runs it rests on and a verdict.  Each function here is a stored answer
(declared in ``results.answers``, read by the report pages through it); a
change to what one computes needs a new version there.
"""

from __future__ import annotations

from django.db import connection
from django.db.models import Count, Min, Q

from benchdb.results import across, hostcost, metrics, population, stats
from benchdb.results.models import Result, Run
from benchdb.results.vocab import FACETS, HARDWARE_FACETS, Source, Visibility
from benchdb_agent import vocab as agent_vocab

CACHE_MODES = agent_vocab.CACHE_MODES
# Workloads offered first when they have data (the suite's headline tests).
PREFERRED = (
    "fio-rand-read-4k-q32t1",
    "fio-rand-write-4k-q32t1",
    "fio-rand-read-4k-q1t1",
    "fio-seq-read-1m-q8t1",
    "fio-seq-write-1m-q8t1",
    "dd-write-1m-fdatasync",
)


def question_runs(question: str):
    """The guest runs a question is asked of: for "cache", those with a
    known cache mode; for "overhead", those paired with a host baseline in
    the population."""
    runs = population.population_runs().filter(role="guest")
    if question == "cache":
        return runs.exclude(cache_mode="unknown")
    return runs.filter(baseline__in=population.population_runs())


def workloads(question: str, limit: int = 12) -> list[dict]:
    """Tests with data for a question ("cache" or "overhead") among the
    population's runs, most measured first (the suite's headline tests
    ahead), each with the figure it is about."""
    runs = question_runs(question)
    rows = (
        Result.objects.filter(run__in=runs)
        .values("test_id")
        .annotate(
            n=Count("run", distinct=True),
            n_iops=Count("iops_mean"),
            n_bw=Count("bw_bytes_mean"),
            n_lat=Count("lat_mean_ns_mean"),
        )
        .order_by("-n", "test_id")[:60]
    )
    # One title per test, grouped by PostgreSQL (not every result's row).
    titles = dict(
        Result.objects.filter(test_id__in=[r["test_id"] for r in rows])
        .exclude(title="")
        .order_by()
        .values("test_id")
        .annotate(first=Min("title"))
        .values_list("test_id", "first")
    )
    out = []
    for row in rows:
        metric = metrics.main_metric(row["test_id"])
        if metric not in population.METRICS:
            counts = {"iops": row["n_iops"], "bw_bytes": row["n_bw"]}
            counts["lat_mean_ns"] = row["n_lat"]
            metric = (
                max(counts, key=lambda m: counts[m]) if any(counts.values()) else None
            )
        if metric is None:
            continue
        out.append(
            {
                "test_id": row["test_id"],
                "title": titles.get(row["test_id"], row["test_id"]),
                "metric": metric,
                "n": row["n"],
            }
        )
    out.sort(
        key=lambda w: (
            PREFERRED.index(w["test_id"]) if w["test_id"] in PREFERRED else 99,
            -w["n"],
        )
    )
    return out[:limit]


def cache_mode_answers(setup: dict, workload: dict) -> list[dict]:
    """Per cache mode, its speed against cache=none over the community's
    systems (``population.answer``, with ``across``'s tests under
    ``["answer"]["detail"]["across"]``), beside its data safety.

    Each mode's pairs with cache=none are read first and their posteriors
    drawn together (``across.drawn_together``): one set of Dirichlet draws
    for the modes that as many systems measured, not one each."""
    read = {
        mode: population.read_answer(
            {**setup, "role": "guest"},
            {"cache_mode": "none"},
            {"cache_mode": mode},
            workload["test_id"],
            workload["metric"],
        )
        for mode in CACHE_MODES
        if mode != "none"
    }
    diffs = [r.diffs for r in read.values()]
    with across.drawn_together(diffs, metrics.equivalence_percent()):
        return _cache_mode_rows(setup, workload, read)


def _cache_mode_rows(setup: dict, workload: dict, read: dict) -> list[dict]:
    out = []
    for mode in CACHE_MODES:
        safety, why = agent_vocab.CACHE_MODE_SAFETY.get(mode, ("", ""))
        row = {"mode": mode, "safety": safety, "why": why, "answer": None}
        # Efficiency: what the mode's guest runs cost the host's CPU per I/O.
        row["host_cpu"] = hostcost.runs_host_cost(
            population.filter_runs({**setup, "role": "guest", "cache_mode": mode})
        )
        if mode != "none":
            ans = population.answer_from(read[mode])
            row["answer"] = ans
            row["has_data"] = bool(ans["runs_a"] and ans["runs_b"])
            # Faster, but by keeping the guest's flushed writes in the host's
            # RAM: never a plain "better" (pages colour that green).
            row["unsafe_faster"] = (
                safety == "unsafe" and ans.get("verdict") == stats.FASTER
            )
            if row["unsafe_faster"]:
                row["caveat"] = UNSAFE_FASTER
        else:
            runs = population.filter_runs(
                {**setup, "role": "guest", "cache_mode": mode}
            )
            row["runs"] = population.figure_spread(
                runs, workload["test_id"], workload["metric"]
            )["runs"]
            row["has_data"] = bool(row["runs"])
        out.append(row)
    return out


# A mode faster than cache=none because it loses flushed data on a host
# power failure: its one wording, on the reports and the compare page
# (``web.present.mark``), never a green "better".
UNSAFE_FASTER = "faster, but loses data on a host power failure"

# Why a guest can beat its own bare-metal host, said beside every such figure.
ABOVE_HOST = (
    "a guest faster than its host is measuring the host's page cache (writes "
    "acknowledged from host RAM, reads served from it) or thin provisioning "
    "(never-written blocks of a sparse image or thin volume read as zeros "
    "without touching the disk), not the disk"
)


def workload_coverage(question: str, setup: dict) -> dict:
    """What the setup has under each workload (test id): its runs, its runs
    per cache mode, and its systems (hardware) measured in every cache mode
    ("cache") or with a paired host run ("overhead"), the population's runs
    only.  The report chooses the workload the setup has most of."""
    runs = population.filter_runs({**setup, "role": "guest"})
    if question == "cache":
        runs = runs.exclude(cache_mode="unknown")
    else:
        runs = runs.filter(baseline__in=population.population_runs())
    results = Result.objects.filter(run__in=runs.values("pk")).order_by()
    # Grouped by PostgreSQL: per test and mode its runs, per test its systems
    # and those measured in every mode (not a row per test, mode and system).
    # A run has one result per test (``results_result_unique_test``), so its
    # runs are counted as rows; systems and modes as the distinct pairs and
    # triples, hashed, then counted: a COUNT(DISTINCT ...) sorted every
    # result of the population (2.7 s a question at 1M results, now 0.7 s).
    out: dict[str, dict] = {}
    for row in results.values("test_id", "run__cache_mode").annotate(n=Count("*")):
        entry = out.setdefault(
            row["test_id"], {"runs": 0, "modes": {}, "systems": 0, "complete": 0}
        )
        entry["runs"] += row["n"]
        entry["modes"][row["run__cache_mode"]] = row["n"]
    systems = results.filter(run__hardware__isnull=False)
    pairs, params = (
        systems.values("test_id", "run__hardware").distinct().query.sql_with_params()
    )
    triples, triple_params = (
        systems.filter(run__cache_mode__in=CACHE_MODES)
        .values("test_id", "run__hardware", "run__cache_mode")
        .distinct()
        .query.sql_with_params()
    )
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT q.test_id, count(*) FROM ({pairs}) AS q GROUP BY q.test_id",
            params,
        )
        for test_id, n in cursor.fetchall():
            out[test_id]["systems"] = n
        cursor.execute(
            "SELECT s.test_id, count(*) FROM (SELECT q.test_id "
            f"FROM ({triples}) AS q GROUP BY q.test_id, q.run__hardware "
            "HAVING count(*) = %s) AS s GROUP BY s.test_id",
            [*triple_params, len(set(CACHE_MODES))],
        )
        for test_id, n in cursor.fetchall():
            out[test_id]["complete"] = n
    return out


def coverage_score(question: str, entry: dict | None) -> tuple:
    """How well a workload answers the question for a setup, best highest:
    systems measured in every mode (cache) or paired systems (overhead),
    then the cache modes measured, then runs."""
    if not entry:
        return (0, 0, 0)
    if question == "cache":
        return (entry["complete"], len(entry["modes"]), entry["runs"])
    return (entry["systems"], 0, entry["runs"])


def workload_arg(workload: dict) -> dict:
    """A workload as the stored answers take it (their argument): its test,
    title and figure, not how many runs it has, which moves with every
    upload (a key of its own each time, and every older one computed again
    by each refresh while it was still asked for)."""
    return {k: workload[k] for k in ("test_id", "title", "metric")}


def choose_workload(question: str, options: list[dict], coverage: dict) -> list:
    """``options`` (the question's workloads) best first for a setup by its
    ``coverage`` (``coverage_score``); the list's own order breaks ties."""
    ranked = sorted(
        enumerate(options),
        key=lambda io: (
            coverage_score(question, coverage.get(io[1]["test_id"])),
            -io[0],
        ),
        reverse=True,
    )
    return [o for _i, o in ranked]


# What ``left_out`` counts: suspect, unlisted or imported runs.
LEFT_OUT = (
    Q(suspect=True) | Q(visibility=Visibility.UNLISTED) | Q(source=Source.IMPORTED)
)


def left_out(setup: dict, test_id: str) -> dict:
    """Per cache mode, the setup's guest runs of ``test_id`` an answer leaves
    out: public but suspect, unlisted, imported (configuration declared, not
    verified).  Private and hidden runs are not counted.  Stored
    (``answers.left_out_counts``): the left-out runs are a share of every
    run, so counting them grows with the table."""
    from benchdb.results import answers

    return {mode: counts for mode, counts in answers.left_out_counts(setup, test_id)}


def left_out_counts(setup: dict, test_id: str) -> list:
    """``left_out`` computed: [cache mode, counts] pairs (a list, so that a
    mode of None is kept as such in the stored JSON)."""
    # Only the runs counted below, through their own index
    # (``results_run_left_out_idx``: a few percent of the runs), not every
    # guest run of the setup joined to its result of that test.
    base = (
        Run.objects.filter(hidden=False)
        .exclude(visibility=Visibility.PRIVATE)
        .filter(LEFT_OUT)
    )
    runs = population.filter_runs({**setup, "role": "guest"}, base=base).filter(
        results__test_id=test_id
    )
    listed = Q(visibility=Visibility.PUBLIC)
    rows = (
        runs.values("cache_mode")
        .annotate(
            n_suspect=Count("pk", filter=listed & Q(suspect=True), distinct=True),
            n_unlisted=Count(
                "pk", filter=Q(visibility=Visibility.UNLISTED), distinct=True
            ),
            n_imported=Count(
                "pk",
                filter=listed & Q(suspect=False, source=Source.IMPORTED),
                distinct=True,
            ),
        )
        .order_by()
    )
    return [
        [
            r["cache_mode"],
            {k: r[f"n_{k}"] for k in ("suspect", "unlisted", "imported")},
        ]
        for r in sorted(rows, key=lambda r: str(r["cache_mode"]))
        if r["n_suspect"] or r["n_unlisted"] or r["n_imported"]
    ]


def setups_with_data(question: str, limit: int = 6) -> list[dict]:
    """The platform and disk type pairs with the most guest runs (cache
    question: with a known cache mode; overhead: paired), as one-click
    choices: [{platform, disk_type, runs}]."""
    runs = question_runs(question)
    rows = (
        runs.exclude(platform="unknown")
        .exclude(hardware__disk_type__isnull=True)
        .exclude(hardware__disk_type="unknown")
        .values("platform", "hardware__disk_type")
        .annotate(n=Count("pk"))
        .order_by("-n", "platform", "hardware__disk_type")[:limit]
    )
    return [
        {
            "platform": r["platform"],
            "disk_type": r["hardware__disk_type"],
            "runs": r["n"],
        }
        for r in rows
    ]


def recommendation(rows: list[dict]) -> dict | None:
    """The page's one-line answer from ``cache_mode_answers``' rows: the
    mode that keeps flushed data and is faster than cache=none by the most
    (None when none is), and unsafe's row when it is faster too (said with
    what it loses).  None when cache=none has no data to compare with."""
    if not rows or not rows[0].get("has_data"):
        return None
    faster = [
        r
        for r in rows[1:]
        if r.get("has_data") and r["answer"]["verdict"] == stats.FASTER
    ]
    safe = [r for r in faster if r["safety"] != "unsafe"]
    best = max(safe, key=lambda r: r["answer"]["effect_percent"] or 0, default=None)
    unsafe = next((r for r in faster if r["safety"] == "unsafe"), None)
    compared = [r for r in rows[1:] if r.get("has_data")]
    return {"best": best, "unsafe": unsafe, "compared": len(compared)}


def cache_mode_ranking(setup: dict, workload: dict) -> dict:
    """The cache modes ranked over the systems of the setup that measured
    every mode with data (``population.rank_settings``), with the
    probabilities of practical equivalence of each pair."""
    return population.rank_settings(
        "cache_mode",
        list(CACHE_MODES),
        {**setup, "role": "guest"},
        workload["test_id"],
        workload["metric"],
    )


def overhead_answer(setup: dict, workload: dict) -> dict:
    """Guest ÷ host over every paired guest of the setup, with a verdict,
    and what the setup's guest runs cost the host's CPU per I/O
    (``host_cpu``, ``hostcost.runs_host_cost``)."""
    runs = population.filter_runs({**setup, "role": "guest"})
    dist = population.distribution(runs, workload["test_id"], workload["metric"])
    out = _overhead_verdict(dist["overhead"], workload["metric"])
    out["host_cpu"] = hostcost.runs_host_cost(runs)
    return out


def overhead_by(field: str, setup: dict, workload: dict) -> list[dict]:
    """The same answer per value of one setting (per storage, per bus…)."""
    choices = dict((FACETS.get(field) or HARDWARE_FACETS[field]).choices)
    column = field if field in FACETS else f"hardware__{field}"
    # Only the values some paired guest has: one query instead of one
    # answer per possible value.
    present = set(
        population.filter_runs({**setup, "role": "guest"})
        .filter(baseline__isnull=False)
        .values_list(column, flat=True)
        .distinct()
    )
    out = []
    for value, label in choices.items():
        if value == "unknown" or value not in present:
            continue
        ans = overhead_answer({**setup, field: value}, workload)
        if ans["runs"]:
            out.append({"value": value, "label": label, **ans})
    return out


def beats_host(ratio: float | None, metric: str) -> bool:
    if ratio is None:
        return False
    return ratio > 1.0 if metrics.higher_is_better(metric) is not False else ratio < 1.0


def _overhead_verdict(over: dict, metric: str) -> dict:
    hib = metrics.higher_is_better(metric)
    margin = metrics.equivalence_percent()
    out = {
        "runs": over.get("runs") or 0,
        "systems": over.get("systems") or 0,
        "ratio": over.get("median"),
        "low": over.get("ci95_low"),
        "high": over.get("ci95_high"),
        "percent": over.get("percent"),
        "verdict": stats.CANNOT_TELL,
        "text": "",
        # The interval too wide to mean anything (``stats.too_wide``): the
        # page says so instead of its bounds.
        "too_noisy": stats.too_wide(over.get("ci95_low"), over.get("ci95_high")),
        # Above 1× on a higher-is-better figure (below on a time): the guest
        # beat bare metal, which the page explains (ABOVE_HOST).
        "above_host": beats_host(over.get("median"), metric),
    }
    if not out["runs"]:
        out["text"] = "no paired guest and host runs for this setup yet"
        return out
    if out["low"] is None:
        out["text"] = (
            f"guest {out['ratio']:.2f}× host, but too few pairs for an interval "
            f"(at least {stats.MIN_REPEATS})"
        )
        return out
    if out["too_noisy"]:
        ci = f"95% interval {stats.too_noisy_text(out['runs'], 'pair')}"
    else:
        ci = f"95% CI {out['low']:.2f}–{out['high']:.2f}× host"
    verdict = stats.interval_verdict(out["ratio"], out["low"], out["high"], hib, margin)
    out["verdict"] = verdict
    if verdict in (stats.FASTER, stats.SLOWER):
        out["text"] = (
            f"the guest is {verdict} than bare metal: {out['ratio']:.2f}× host ({ci})"
        )
    elif verdict == stats.EQUIVALENT:
        out["text"] = f"no difference larger than {margin:g}% from bare metal ({ci})"
    else:
        out["text"] = f"cannot tell yet: too few systems or too much spread ({ci})"
    return out
