"""Answers the pages summarise, computed by PostgreSQL in one query each.

- ``facet_counts``: every browse facet's counts in one ``GROUPING SETS``
  query (plus one per facet the reader has chosen, counted as if it were not);
- ``overhead_summary`` / ``overhead_pairs``: guest against host baseline per
  test as percentiles over the ``*_mean`` columns, and one page of pairs;
- ``cache_mode_groups``: runs that differ only in cache mode, grouped by the
  database, a page at a time.

None of them loads more rows into Python than the page shows.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from django.db import connection
from django.db.models import Count, F, QuerySet

from benchdb.results import stats
from benchdb.results.metrics import main_metric
from benchdb.results.models import Run
from benchdb.results.overheads import pair_overheads
from benchdb.results.vocab import CACHE_MODES, FACET_PATHS, LAYOUT, Visibility


def _grouped_counts(
    qs: QuerySet, names: Iterable[str], limit: int | None = None
) -> dict[str, dict]:
    """{facet: {value: runs}} for ``names`` over ``qs`` (over at most
    ``limit`` of its runs, any of them, when given), in one query."""
    names = list(names)
    if not names:
        return {}
    aliases = {name: f"f_{i}" for i, name in enumerate(names)}
    inner = qs.order_by().values(
        **{alias: F(FACET_PATHS[name]) for name, alias in aliases.items()}
    )
    if limit is not None:
        inner = inner[:limit]
    sql, params = inner.query.sql_with_params()
    cols = ", ".join(aliases.values())
    sets = ", ".join(f"({a})" for a in aliases.values())
    grouping = ", ".join(f"GROUPING({a})" for a in aliases.values())
    query = (
        f"SELECT {cols}, ARRAY[{grouping}], count(*) FROM ({sql}) AS runs "
        f"GROUP BY GROUPING SETS ({sets})"
    )
    out: dict[str, dict] = {name: {} for name in names}
    with connection.cursor() as cursor:
        cursor.execute(query, params)
        for row in cursor.fetchall():
            values, flags, count = row[: len(names)], row[len(names)], row[-1]
            # GROUPING() is 0 for the one column this row is grouped by.
            index = flags.index(0)
            out[names[index]][values[index]] = count
    return out


def facet_counts(
    base: QuerySet,
    filtered: QuerySet,
    chosen: dict[str, QuerySet],
    known: dict[str, dict] | None = None,
    limit: int | None = None,
) -> dict[str, dict]:
    """Counts per facet value: over ``filtered`` for facets the reader has not
    chosen (one query for all of them), and over ``chosen[name]`` (the
    filters without that facet's own) for each facet the reader has chosen,
    so its other values stay visible and can be added to the selection.
    ``known``: counts of chosen facets the caller has already (value -> runs,
    hosts under their guests' platforms included), not counted again.
    ``limit``: each count is over at most this many runs (a longer list's
    counts are then lower bounds).
    """
    known = known or {}
    not_chosen = [n for n in FACET_PATHS if n not in chosen]
    out = _grouped_counts(filtered, not_chosen, limit)
    for name, qs in chosen.items():
        if name in known:
            out[name] = dict(known[name])
        else:
            out.update(_grouped_counts(qs, [name], limit))
    if "platform" not in known:
        # Not limited: driven by the guests' baseline index, it reads the
        # hosts' guests, not the list (a limit made it scan for hosts).
        add_hosts_by_guest_platform(chosen.get("platform", filtered), out["platform"])
    return out


def rows_counted(counts: dict[str, dict], chosen: dict) -> int | None:
    """The rows of ``filtered`` from ``facet_counts``' answer: a facet counted
    over them (not chosen) has one count per value, NULL included, so its
    counts add up to every row.  Not platform, whose hosts are counted under
    their guests' platforms too.  None when every other facet is chosen."""
    for name in FACET_PATHS:
        if name not in chosen and name != "platform":
            return sum(counts[name].values())
    return None


def add_hosts_by_guest_platform(runs: QuerySet, counts: dict) -> dict:
    """Add to ``counts`` (platform -> runs, each run under its own platform)
    the host runs of ``runs`` under every other platform their listed guests
    run on (a private or hidden guest must not show through its host).

    The ``platform`` filter (results/filters.py) returns a host baseline for
    the platform of any guest measured against it, so the count shown for a
    platform is the number of runs that filter returns.  One query.
    """
    # ``runs`` are listed runs (browse's, home's), so their hosts are listed:
    # saying so of the baseline lets its platform be read from the listed
    # runs' covering index.  Joined to every guest's baseline row instead
    # (to compare platforms), the whole run table was read, even for no
    # row; a filtered list's few hosts are looked up by id.
    rows = (
        Run.objects.listed()
        .filter(
            baseline__in=runs.filter(role="host").order_by().values("pk"),
            baseline__visibility=Visibility.PUBLIC,
            baseline__hidden=False,
        )
        .exclude(platform=F("baseline__platform"))
        .order_by()
        .values_list("platform")
        .annotate(n=Count("baseline_id", distinct=True))
    )
    for platform, n in rows:
        counts[platform] = counts.get(platform, 0) + n
    return counts


# Overhead: guest against its host baseline --------------------------------

OVERHEAD_METRICS = {
    "iops": "iops_mean",
    "bw_bytes": "bw_bytes_mean",
    "lat_mean_ns": "lat_mean_ns_mean",
}
_PAIRS = """
FROM results_run r
JOIN results_run b ON b.id = r.baseline_id
JOIN results_result g ON g.run_id = r.id AND g.comparable
JOIN results_result h ON h.run_id = b.id
     AND h.comparability_key = g.comparability_key
WHERE r.role = 'guest' AND r.id = ANY(%(runs)s)
"""


def _listed_ids(guests: QuerySet) -> tuple[str, list]:
    sql, params = guests.order_by().values("pk").query.sql_with_params()
    return sql, list(params)


def overhead_summary(guests: QuerySet, baselines: QuerySet) -> list[dict]:
    """Per test: pairs, and the quartiles of guest / host for each metric
    column (``metric``: the test's main metric, ``metrics.main_metric``).

    ``guests``: the guest runs a report may show; ``baselines``: the runs
    their baselines must be among (both listed, for a public report).
    """
    g_sql, g_params = _listed_ids(guests)
    b_sql, b_params = _listed_ids(baselines)
    ratios = []
    for metric, column in OVERHEAD_METRICS.items():
        ratio = f"g.{column} / NULLIF(h.{column}, 0)"
        ratios.append(
            f"count({ratio}) AS {metric}_n, "
            f"percentile_cont(ARRAY[0.25, 0.5, 0.75]) WITHIN GROUP "
            f"(ORDER BY {ratio}) AS {metric}_q, "
            # The ratios in order, for the median's interval (results.stats).
            f"array_agg({ratio} ORDER BY {ratio}) "
            f"FILTER (WHERE {ratio} IS NOT NULL) AS {metric}_all"
        )
    # The pairs first, materialised: with the two IN subqueries beside the
    # result joins PostgreSQL re-sorted the guest list once per guest run.
    query = (
        "WITH r AS MATERIALIZED (SELECT id, baseline_id, hardware_id "
        f"FROM results_run WHERE role = 'guest' AND id IN ({g_sql}) "
        f"AND baseline_id IN ({b_sql})) "
        f'SELECT g.test_id, min(g.title), min(g."group"), count(*), '
        "count(DISTINCT r.hardware_id), "
        f"{', '.join(ratios)} "
        "FROM r "
        "JOIN results_result g ON g.run_id = r.id AND g.comparable "
        "JOIN results_result h ON h.run_id = r.baseline_id "
        "AND h.comparability_key = g.comparability_key "
        'GROUP BY g.test_id ORDER BY min(g."group"), g.test_id'
    )
    rows = []
    with connection.cursor() as cursor:
        cursor.execute(query, g_params + b_params)
        for test_id, title, group, pairs, systems, *per_metric in cursor.fetchall():
            metrics = {}
            for i, metric in enumerate(OVERHEAD_METRICS):
                n, q, ordered = per_metric[3 * i : 3 * i + 3]
                if n:
                    # Distribution-free 95% interval of the median ratio.
                    low, high = stats.median_order_interval(ordered)
                    metrics[metric] = {
                        "n": n,
                        "q1": q[0],
                        "median": q[1],
                        "q3": q[2],
                        "ci95_low": low,
                        "ci95_high": high,
                    }
            main = main_metric(test_id)
            if main not in metrics:
                main = next(iter(metrics), None)
            rows.append(
                {
                    "test_id": test_id,
                    "title": title or test_id,
                    "group": group,
                    "pairs": pairs,
                    "systems": systems,
                    "metric": main,
                    "metrics": metrics,
                    "main": metrics.get(main),
                }
            )
    return rows


def overhead_pairs(guest_page: Iterable[Run]) -> list[dict]:
    """Test-by-test guest / host figures for one page of guest runs (whose
    baselines the caller has already checked), in one query."""
    guests = {g.pk: g for g in guest_page}
    if not guests:
        return []
    query = (
        "SELECT g.id, h.id, g.stats->>'main_direction', "
        'g.run_id, g.test_id, g.title, g."group", '
        + ", ".join(f"g.{c}, h.{c}" for c in OVERHEAD_METRICS.values())
        + " FROM results_result g JOIN results_run r ON r.id = g.run_id "
        "JOIN results_result h ON h.run_id = r.baseline_id "
        "AND h.comparability_key = g.comparability_key "
        "WHERE g.run_id = ANY(%s) AND g.comparable "
        'ORDER BY g."group", g.test_id'
    )
    by_run: dict[int, list[dict]] = defaultdict(list)
    with connection.cursor() as cursor:
        cursor.execute(query, [list(guests)])
        for (
            g_id,
            h_id,
            direction,
            run_id,
            test_id,
            title,
            group,
            *values,
        ) in cursor.fetchall():
            means = {
                metric: (values[2 * i], values[2 * i + 1])
                for i, metric in enumerate(OVERHEAD_METRICS)
            }
            metric = main_metric(test_id)
            if metric not in means or None in means[metric] or not means[metric][1]:
                metric = next(
                    (m for m, (g, h) in means.items() if g is not None and h), None
                )
            if metric is None:
                continue
            g_mean, h_mean = means[metric]
            by_run[run_id].append(
                {
                    "test_id": test_id,
                    "title": title or test_id,
                    "group": group,
                    "metric": metric,
                    "guest_mean": g_mean,
                    "host_mean": h_mean,
                    "ratio": g_mean / h_mean,
                    "overhead": (g_mean / h_mean - 1) * 100,
                    "_pair": (g_id, h_id, direction),
                }
            )
    # Every overhead with its 95% interval over the repeats (one query).
    rows = [row for tests in by_run.values() for row in tests]
    intervals = pair_overheads([(*row["_pair"], row["metric"]) for row in rows])
    for row, interval in zip(rows, intervals, strict=True):
        del row["_pair"]
        row["interval"] = interval
    return [
        {"guest": guests[pk], "host": guests[pk].baseline, "tests": by_run[pk]}
        for pk in guests
    ]


# Cache-mode groups ---------------------------------------------------------

CACHE_ORDER = list(CACHE_MODES)
# Runs that differ only in cache mode: same hardware, disk layout and suite.
GROUP_KEY = (
    "hardware_id",
    *(name for name in LAYOUT if name != "cache_mode"),
    "suite_id",
    "suite_version",
)


def cache_mode_group_ids(
    guests: QuerySet, page: int = 1, per_page: int = 50
) -> tuple[list[dict[str, int]], int]:
    """One page of groups of guest runs that differ only in cache mode (same
    hardware, layout and suite), newest group first, as {cache mode: run id}
    of the first run (lowest id) of each mode; and the number of groups.
    Two queries."""
    qs = guests.filter(role="guest", cache_mode__in=CACHE_ORDER)
    sql, params = (
        qs.order_by().values(*GROUP_KEY, "cache_mode", "id").query.sql_with_params()
    )
    key = ", ".join(GROUP_KEY)
    # Plain equalities, so PostgreSQL can hash-join the page's groups to the
    # runs (IS NOT DISTINCT FROM cannot be hashed: a nested loop of every
    # group against every run); only the hardware may be NULL.
    same_group = " AND ".join(
        f"COALESCE(runs.{c}, 0) = COALESCE(p.{c}, 0)"
        if c == "hardware_id"
        else f"runs.{c} = p.{c}"
        for c in GROUP_KEY
    )
    grouped = (
        f"SELECT {key}, count(DISTINCT cache_mode) AS modes, max(id) AS newest, "
        "array_agg(DISTINCT cache_mode) AS cache_modes "
        f"FROM ({sql}) AS runs GROUP BY {key} HAVING count(DISTINCT cache_mode) > 1"
    )
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM ({grouped}) AS g", params)
        total = cursor.fetchone()[0]
        offset = max(0, (page - 1) * per_page)
        cursor.execute(
            f"""
            WITH page AS ({grouped} ORDER BY newest DESC LIMIT %s OFFSET %s)
            SELECT DISTINCT ON (p.newest, runs.cache_mode) p.newest,
                   runs.cache_mode, runs.id
            FROM page p JOIN ({sql}) AS runs ON
                {same_group}
            ORDER BY p.newest DESC, runs.cache_mode, runs.id
            """,
            [*params, per_page, offset, *params],
        )
        members: dict[int, dict[str, int]] = defaultdict(dict)
        for newest, mode, run_id in cursor.fetchall():
            members[newest][mode] = run_id
    return list(members.values()), total


def cache_mode_pages_without(answer: list, removed: set[int]) -> list:
    """A stored ``cache_mode_group_ids`` page ([groups, total], as
    ``reads.cache_mode_group_page`` stores it) without the removed runs: a
    group left with one cache mode is no group (and no longer counted).
    Served while the page is computed again after a removal."""
    pages, total = answer
    kept = []
    for by_mode in pages:
        left = {m: rid for m, rid in by_mode.items() if rid not in removed}
        if len(left) > 1:
            kept.append(left)
    return [kept, total - (len(pages) - len(kept))]


def cache_mode_groups_of(pages: list[dict[str, int]]) -> list[dict]:
    """The groups ``cache_mode_group_ids`` named, with their runs (one query)."""
    ids = [rid for m in pages for rid in m.values()]
    runs = (
        Run.objects.select_related("hardware", "hardware__disk_model")
        .defer("environment", "tags", "tag_sources", "warnings")
        .in_bulk(ids)
    )
    out = []
    for by_mode in pages:
        members = [runs.get(by_mode[m]) for m in CACHE_ORDER if m in by_mode]
        members = [r for r in members if r is not None]
        if len(members) > 1:
            out.append(_group(members))
    return out


def cache_mode_groups(
    guests: QuerySet, page: int = 1, per_page: int = 50
) -> tuple[list[dict], int]:
    """One page of groups of guest runs that differ only in cache mode (same
    hardware, layout and suite), newest group first, with the first run
    (lowest id) of each mode; and the number of groups.  Two queries, and
    one for the runs shown."""
    pages, total = cache_mode_group_ids(guests, page, per_page)
    return cache_mode_groups_of(pages), total


def _group(ordered: list[Run]) -> dict:
    first = ordered[0]
    parts = [
        first.get_platform_display(),
        first.get_storage_backend_display(),
        first.get_image_format_display(),
        first.get_disk_bus_display(),
    ]
    return {
        "key": "-".join(str(r.pk) for r in ordered),
        "title": ", ".join(parts) + (f" · {first.hardware}" if first.hardware else ""),
        "runs": ordered,
        "modes": [r.cache_mode for r in ordered],
    }


def cache_mode_group(guests: QuerySet, key: str) -> dict | None:
    """The group a key names (run ids joined by "-"), if those runs are among
    ``guests``, share one group key and have distinct cache modes."""
    try:
        ids = [int(part) for part in key.split("-")]
    except ValueError:
        return None
    if not 2 <= len(ids) <= len(CACHE_ORDER):
        return None
    found = (
        guests.filter(pk__in=ids, role="guest", cache_mode__in=CACHE_ORDER)
        .select_related("hardware", "hardware__disk_model")
        .in_bulk()
    )
    if len(found) != len(set(ids)):
        return None
    runs = list(found.values())
    keys = {tuple(getattr(r, c) for c in GROUP_KEY) for r in runs}
    modes = [r.cache_mode for r in runs]
    if len(keys) != 1 or len(set(modes)) != len(modes):
        return None
    return _group(sorted(runs, key=lambda r: CACHE_ORDER.index(r.cache_mode)))
