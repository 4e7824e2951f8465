"""Every API endpoint and page, each beside the hand-written SQL answering
the same question, so both are timed in the same run on the same data.

The SQL is what a person would write for the answer the endpoint gives: the
same rows, filters and ordering, fetched completely by psycopg; it is the
floor the service is measured against (target: p95 <= 2 x SQL + 5 ms).
For pages that summarise (reports, browse facets) the SQL is the summary.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

# The run list columns the list serializer shows (and the browse page).
RUN_COLS = """r.id, r.uuid, r.title, r.role, r.platform, r.virtualization,
 r.hypervisor_version, r.os_name, r.kernel, r.cache_mode, r.aio_mode, r.iothread,
 r.image_format, r.storage_backend, r.disk_bus, r.guest_filesystem,
 r.host_filesystem, r.suite_id, r.suite_version, r.profile, r.agent_version,
 r.ran_at, r.source, r.citation, r.citation_url, r.notes, r.visibility,
 r.pair_id, r.baseline_id, r.suspect, r.suspect_reasons, r.hidden,
 r.hidden_reason, r.owner_id, r.created, r.updated,
 h.id, h.disk_type, h.raid_level, h.cpu_cores, h.cpu_threads, h.memory_bytes,
 h.disk_count, h.disk_size_bytes, c.name, d.name"""
RUN_JOIN = """results_run r
 LEFT JOIN results_hardware h ON h.id = r.hardware_id
 LEFT JOIN results_cpumodel c ON c.id = h.cpu_model_id
 LEFT JOIN results_diskmodel d ON d.id = h.disk_model_id"""
VISIBLE = "r.visibility = 'public' AND NOT r.hidden"
# A count a page gives as "more than" past this many.
BOUND = 10_000
# The planner's estimate of the listed runs: what a page that says "about N"
# reads (a stored count costs the same one-row read).
ESTIMATED_COUNT = (
    "SELECT reltuples::bigint FROM pg_class WHERE oid = 'results_run'::regclass"
)
EXPORT_COLS = """r.id, r.uuid, r.created, r.ran_at, r.role, r.platform,
 r.virtualization, r.cache_mode, r.aio_mode, r.iothread, r.image_format,
 r.storage_backend, r.disk_bus, h.disk_type, d.name, c.name, r.suite_id,
 r.suite_version, r.source, r.suspect, r.baseline_id, x.test_id,
 x.comparability_key, x.tool, x.repeat_count, x.iops_mean, x.bw_bytes_mean,
 x.lat_mean_ns_mean"""
FACETS = (
    "r.role",
    "r.platform",
    "r.virtualization",
    "r.cache_mode",
    "r.aio_mode",
    "r.image_format",
    "r.storage_backend",
    "r.disk_bus",
    "r.source",
    "h.disk_type",
    "h.raid_level",
)

# Listed hosts counted under each other platform their guests run on (the
# platform facet of home and browse).
HOSTS_BY_GUEST_PLATFORM = (
    "SELECT r.platform, count(DISTINCT r.baseline_id) "
    "FROM results_run r JOIN results_run b ON b.id = r.baseline_id "
    "WHERE b.visibility = 'public' AND NOT b.hidden "
    "AND b.role = 'host' AND r.platform <> b.platform GROUP BY 1"
)


@dataclass
class Endpoint:
    """One row: a URL, the hand-written SQL answering it, what it is."""

    name: str
    url: str
    # The hand-written SQL of what the answer reads live.  For an answer the
    # app serves from stored rows (``answer_cache``), the read of each stored
    # row the request found is added to it (``timing.Captured.stored_rows``):
    # a stored answer is held against the read of its stored row.
    sql: list[tuple[str, list]]
    kind: str = "api"  # api | page | export
    notes: str = ""
    # What the stored parts of this answer cost computed from every run: the
    # floor of the refresh's row (the refresh computes them), not of this one.
    live_sql: list[tuple[str, list]] = field(default_factory=list)
    # Comparisons of random run sets, each asked once: ``url`` and the SQL
    # are made per set (``url.format(runs=...)``, ``_compare_sql``); the
    # number of runs, or PAIR for a random guest with its host.
    random_runs: int = 0
    # The hand-written SQL of one random set (a comparison's by default).
    random_sql: Callable[[list[int]], list[tuple[str, list]]] | None = None


# ``random_runs`` of a guest+host comparison: a random guest and its host.
PAIR = -1


def _run_page_sql(ids: list[int]) -> list[tuple[str, list]]:
    """A run page's reads: the run, its results and measurements, and its
    host's results."""
    (run,) = ids
    return [
        (f"SELECT {RUN_COLS} FROM {RUN_JOIN} WHERE r.id = %s", [run]),
        (
            'SELECT * FROM results_result WHERE run_id = %s ORDER BY "group", test_id',
            [run],
        ),
        (
            "SELECT m.* FROM results_measurement m JOIN results_result x "
            "ON x.id = m.result_id WHERE x.run_id = %s "
            "ORDER BY m.result_id, m.repeat",
            [run],
        ),
        (
            "SELECT x.* FROM results_result x JOIN results_run r "
            "ON r.baseline_id = x.run_id WHERE r.id = %s",
            [run],
        ),
    ]


def _compare_sql(ids: list[int]) -> list[tuple[str, list]]:
    return [
        (f"SELECT {RUN_COLS} FROM {RUN_JOIN} WHERE r.id = ANY(%s)", [ids]),
        (
            'SELECT x.id, x.run_id, x.test_id, x.title, x."group", x.tool, '
            "x.comparability_key, x.stats -> 'main_direction' FROM results_result x "
            "WHERE x.run_id = ANY(%s) AND x.comparable ORDER BY x.test_id, x.run_id",
            [ids],
        ),
        (
            "SELECT m.* FROM results_measurement m JOIN results_result x "
            "ON x.id = m.result_id WHERE x.run_id = ANY(%s) AND x.comparable "
            "ORDER BY m.result_id, m.repeat, m.direction, m.job",
            [ids],
        ),
    ]


POPULATION = f"{VISIBLE} AND NOT r.suspect"


def _spread_sql(figure: str, joins: str, where: str, group: str) -> str:
    """count, systems, quartiles, min, max and the ordered values of
    ``figure`` (what ``population._spread`` computes), per ``group``."""
    return (
        f"SELECT {group} AS g, count({figure}), count(DISTINCT r.hardware_id), "
        f"percentile_cont(ARRAY[0.25, 0.5, 0.75]) WITHIN GROUP (ORDER BY {figure}), "
        f"min({figure}), max({figure}), array_agg({figure} ORDER BY {figure}) "
        f"FROM results_run r JOIN results_result x ON x.run_id = r.id {joins} "
        f"WHERE {where} GROUP BY GROUPING SETS ((), ({group}))"
    )


def _cache_answer_sql(
    test: str, key: str, column: str, modes: tuple = ()
) -> list[tuple[str, list]]:
    """Each cache mode (of ``modes``, default all) against none over the
    community's guest runs of one test: per mode the figures' spread, and
    per mode and system the mean log figure (the paired effect)."""
    where = (
        f"{POPULATION} AND r.role = 'guest' AND x.test_id = %s "
        f"AND x.comparability_key = %s AND x.comparable AND x.{column} > 0"
    )
    if modes:
        where += " AND r.cache_mode IN (" + ", ".join(f"'{m}'" for m in modes) + ")"
    return [
        (_spread_sql(f"x.{column}", "", where, "r.cache_mode"), [test, key]),
        (
            f"SELECT r.cache_mode, r.hardware_id, avg(ln(x.{column})), count(*) "
            "FROM results_run r JOIN results_result x ON x.run_id = r.id "
            f"WHERE {where} AND r.hardware_id IS NOT NULL GROUP BY 1, 2",
            [test, key],
        ),
    ]


def _overhead_answer_sql(
    test: str, key: str, column: str, group: str = "r.storage_backend"
) -> list[tuple[str, list]]:
    """Guest / host over every paired guest run of one test, overall and per
    ``group`` (the overhead report's answer)."""
    joins = (
        "JOIN results_run b ON b.id = r.baseline_id "
        "AND b.visibility = 'public' AND NOT b.hidden AND NOT b.suspect "
        "JOIN results_result hx ON hx.run_id = b.id "
        f"AND hx.comparability_key = x.comparability_key AND hx.{column} > 0"
    )
    where = (
        f"{POPULATION} AND r.role = 'guest' AND x.test_id = %s "
        f"AND x.comparability_key = %s AND x.comparable AND x.{column} > 0"
    )
    figure = f"x.{column} / hx.{column}"
    return [(_spread_sql(figure, joins, where, group), [test, key])]


def _population_sql(test: str, key: str, disk_type: str) -> list[tuple[str, list]]:
    """/api/v1/population/ for guest runs on one disk type: the most common
    key, the figures' spread and the guest / host spread (no grouping)."""
    hw = "JOIN results_hardware dh ON dh.id = r.hardware_id AND dh.disk_type = %s "
    where = (
        f"{POPULATION} AND r.role = 'guest' AND x.test_id = %s "
        "AND x.comparability_key = %s AND x.comparable AND x.iops_mean > 0"
    )
    host = (
        "JOIN results_run b ON b.id = r.baseline_id "
        "AND b.visibility = 'public' AND NOT b.hidden AND NOT b.suspect "
        "JOIN results_result hx ON hx.run_id = b.id "
        "AND hx.comparability_key = x.comparability_key AND hx.iops_mean > 0 "
    )
    return [
        (
            "SELECT x.comparability_key, count(*) FROM results_result x "
            f"JOIN results_run r ON r.id = x.run_id {hw}"
            f"WHERE {POPULATION} AND r.role = 'guest' AND x.test_id = %s "
            "AND x.comparable AND x.iops_mean > 0 "
            "GROUP BY 1 ORDER BY 2 DESC LIMIT 1",
            [disk_type, test],
        ),
        (_spread_sql("x.iops_mean", hw, where, "r.role"), [disk_type, test, key]),
        (
            _spread_sql("x.iops_mean / hx.iops_mean", hw + host, where, "r.role"),
            [disk_type, test, key],
        ),
    ]


def build(ctx: dict) -> list[Endpoint]:
    """The endpoint list for a database; ``ctx`` names the runs to ask about
    (see ``pick_context``)."""
    run = ctx["guest"]
    host = ctx["host"]
    ten = ctx["compare"][:10]
    test = ctx["test_id"]
    key = ctx["key"]
    ten_csv = ",".join(map(str, ten))
    list_where = (
        f"{VISIBLE} AND r.cache_mode IN ('none') AND h.disk_type IN ('nvme-ssd')"
    )
    facet_sets = ", ".join(f"({f})" for f in FACETS)
    out = [
        Endpoint(
            "API run list, filtered",
            "/api/v1/runs/?cache_mode=none&disk_type=nvme-ssd",
            [
                # A count bounded at BOUND (a page says "more than 10,000"):
                # nothing counts every run on a request (issue 35).
                (
                    f"SELECT count(*) FROM (SELECT 1 FROM {RUN_JOIN} "
                    f"WHERE {list_where} LIMIT {BOUND}) n",
                    [],
                ),
                (
                    f"SELECT {RUN_COLS} FROM {RUN_JOIN} WHERE {list_where} "
                    "ORDER BY r.created DESC, r.id DESC LIMIT 50",
                    [],
                ),
            ],
            notes=f"count bounded at {BOUND:,}",
        ),
        Endpoint(
            "API run list, deep page",
            f"/api/v1/runs/?page={ctx['page']}",
            [
                # The planner's estimate of the listed runs ("about N"), as a
                # stored count would be read: one row.
                (ESTIMATED_COUNT, []),
                # Ids first (the offset walks the listed-runs index only),
                # then the page's rows, as the app pages.
                (
                    f"SELECT {RUN_COLS} FROM {RUN_JOIN} WHERE r.id IN ("
                    f"SELECT r.id FROM results_run r WHERE {VISIBLE} "
                    "ORDER BY r.created DESC, r.id DESC LIMIT 50 OFFSET %s) "
                    "ORDER BY r.created DESC, r.id DESC",
                    [50 * ctx["page"] - 50],
                ),
            ],
            notes=f"page {ctx['page']}; ids first, an estimated count",
        ),
        Endpoint(
            "API run detail",
            f"/api/v1/runs/{run}/",
            [
                (
                    f"SELECT {RUN_COLS}, r.environment, r.tags, r.warnings "
                    f"FROM {RUN_JOIN} WHERE r.id = %s",
                    [run],
                ),
                (
                    "SELECT * FROM results_result WHERE run_id = %s "
                    'ORDER BY "group", test_id',
                    [run],
                ),
                (
                    "SELECT m.* FROM results_measurement m JOIN results_result x "
                    "ON x.id = m.result_id WHERE x.run_id = %s "
                    "ORDER BY m.result_id, m.repeat, m.direction, m.job",
                    [run],
                ),
                (
                    "SELECT o.id, o.result_id, o.repeat, o.format FROM "
                    "results_rawoutput o JOIN results_result x ON x.id = o.result_id "
                    "WHERE x.run_id = %s",
                    [run],
                ),
                (
                    "SELECT x.* FROM results_result x JOIN results_run r "
                    "ON r.baseline_id = x.run_id WHERE r.id = %s",
                    [run],
                ),
            ],
        ),
        # Comparisons as users meet them: a new set of runs each request,
        # asked once (the memo keeps about 12 ten-run comparisons per web
        # process): computed.  The headline rows.
        Endpoint(
            "API compare, 10 random runs",
            "/api/v1/compare/?runs={runs}",
            [],
            random_runs=10,
            notes="a new random set of listed guests each round: computed",
        ),
        Endpoint(
            "API compare, 2 random runs",
            "/api/v1/compare/?runs={runs}",
            [],
            random_runs=2,
            notes="a new random pair of listed guests each round: computed",
        ),
        Endpoint(
            "page compare, 10 random runs",
            "/compare/?runs={runs}",
            [],
            kind="page",
            random_runs=10,
            notes="a new random set each round: computed",
        ),
        Endpoint(
            "page compare, guest+host, random",
            "/compare/?runs={runs}",
            [],
            kind="page",
            random_runs=PAIR,
            notes="a random listed guest and its host each round: computed",
        ),
        # The same URL asked again and again: the comparison kept in each
        # web process (``compare._MEMO``), a hot page's case.
        Endpoint(
            "API compare, 10 runs, memo hit",
            f"/api/v1/compare/?runs={ten_csv}",
            _compare_sql(ten),
            notes="the same 10 runs every round: kept",
        ),
        Endpoint(
            "page compare, guest+host, memo hit",
            f"/compare/?runs={run},{host}",
            _compare_sql([run, host]),
            kind="page",
            notes="the same pair every round: kept",
        ),
        # A run page asked again (a shared link): kept for anonymous
        # visitors (benchdb/web/kept.py).
        Endpoint(
            "page run",
            f"/runs/{run}/",
            _run_page_sql([run]),
            kind="page",
            notes="the same run every round: kept",
        ),
        Endpoint(
            "page run, random",
            "/runs/{runs}/",
            [],
            kind="page",
            random_runs=1,
            random_sql=_run_page_sql,
            notes="a new random listed guest each round: written",
        ),
        Endpoint(
            "page home",
            "/",
            [
                (
                    f"SELECT {RUN_COLS} FROM {RUN_JOIN} WHERE {VISIBLE} "
                    "ORDER BY r.created DESC, r.id DESC LIMIT 10",
                    [],
                ),
                # The published data sets it lists.
                (
                    "SELECT r.id, r.title, r.cache_mode, r.citation FROM "
                    f"results_run r WHERE {VISIBLE} AND r.source = 'published' "
                    "ORDER BY r.citation, r.id",
                    [],
                ),
            ],
            kind="page",
            notes="counts and facets: a summary of every listed run",
            live_sql=[
                (
                    "SELECT count(*), count(DISTINCT r.hardware_id) FROM "
                    f"results_run r WHERE {VISIBLE}",
                    [],
                ),
                (
                    "SELECT r.cache_mode, r.storage_backend, r.platform, "
                    f"h.disk_type, count(*) FROM {RUN_JOIN} WHERE {VISIBLE} "
                    "GROUP BY GROUPING SETS ((r.cache_mode), (r.storage_backend), "
                    "(r.platform), (h.disk_type))",
                    [],
                ),
                # The page's platform counts list a host baseline under its
                # guests' platforms too (as browse's ?platform= filter does).
                (HOSTS_BY_GUEST_PLATFORM, []),
            ],
        ),
        Endpoint(
            "page browse /runs/",
            "/runs/",
            [
                (
                    f"SELECT {RUN_COLS} FROM {RUN_JOIN} WHERE {VISIBLE} "
                    "ORDER BY r.created DESC, r.id DESC LIMIT 50",
                    [],
                ),
            ],
            kind="page",
            notes="count + 11 facets (a summary of every listed run) + page",
            live_sql=[
                (
                    f"SELECT {', '.join(FACETS)}, count(*) FROM {RUN_JOIN} "
                    f"WHERE {VISIBLE} GROUP BY GROUPING SETS ({facet_sets})",
                    [],
                ),
                # The platform facet counts a host under its guests' platforms.
                (HOSTS_BY_GUEST_PLATFORM, []),
            ],
        ),
        Endpoint(
            "page browse, filtered",
            "/runs/?cache_mode=none&cache_mode=writeback&disk_type=hdd",
            [
                (
                    f"SELECT {', '.join(FACETS)}, count(*) FROM {RUN_JOIN} "
                    f"WHERE {VISIBLE} AND r.cache_mode IN ('none', 'writeback') "
                    f"AND h.disk_type IN ('hdd') GROUP BY GROUPING SETS ({facet_sets})",
                    [],
                ),
                (
                    f"SELECT {RUN_COLS} FROM {RUN_JOIN} WHERE {VISIBLE} "
                    "AND r.cache_mode IN ('none', 'writeback') "
                    "AND h.disk_type IN ('hdd') "
                    "ORDER BY r.created DESC, r.id DESC LIMIT 50",
                    [],
                ),
                # A chosen facet counts as if its own filter were off (its
                # other values stay offered): one count per chosen facet.
                (
                    f"SELECT r.cache_mode, count(*) FROM {RUN_JOIN} "
                    f"WHERE {VISIBLE} AND h.disk_type IN ('hdd') GROUP BY 1",
                    [],
                ),
                (
                    f"SELECT h.disk_type, count(*) FROM {RUN_JOIN} WHERE {VISIBLE} "
                    "AND r.cache_mode IN ('none', 'writeback') GROUP BY 1",
                    [],
                ),
                # Hosts of the filtered list under their guests' platforms.
                (
                    "SELECT r.platform, count(DISTINCT r.baseline_id) "
                    "FROM results_run r JOIN results_run b ON b.id = r.baseline_id "
                    "LEFT JOIN results_hardware h ON h.id = b.hardware_id "
                    "WHERE b.visibility = 'public' AND NOT b.hidden "
                    "AND b.role = 'host' AND b.cache_mode IN ('none', 'writeback') "
                    "AND h.disk_type IN ('hdd') AND r.platform <> b.platform "
                    "GROUP BY 1",
                    [],
                ),
            ],
            kind="page",
            notes="facets (each chosen one without its own filter) + page",
        ),
        Endpoint(
            "page cache-mode report",
            "/reports/cache-modes/",
            # One group of runs compared, read live.
            _compare_sql(ctx["compare"][:5]),
            kind="page",
            notes="answers per mode + groups summary + one group compared",
            live_sql=[
                (
                    "SELECT r.hardware_id, r.platform, r.storage_backend, "
                    "r.image_format, r.disk_bus, r.aio_mode, r.suite_id, "
                    "r.suite_version, count(*), count(DISTINCT r.cache_mode) "
                    f"FROM results_run r WHERE {VISIBLE} AND r.role = 'guest' "
                    "AND r.cache_mode IN ('none', 'writethrough', 'writeback', "
                    "'directsync', 'unsafe') GROUP BY 1, 2, 3, 4, 5, 6, 7, 8 "
                    "HAVING count(DISTINCT r.cache_mode) > 1 ORDER BY count(*) DESC "
                    "LIMIT 50",
                    [],
                ),
                *_cache_answer_sql(
                    *ctx.get("cache_workload", (test, key, "iops_mean"))
                ),
            ],
        ),
        Endpoint(
            "page overhead report",
            "/reports/overhead/",
            [
                # The page of pairs it lists.
                (
                    "SELECT r.id, r.baseline_id, g.test_id, g.iops_mean, b.iops_mean "
                    "FROM results_run r JOIN results_result g ON g.run_id = r.id "
                    "JOIN results_result b ON b.run_id = r.baseline_id "
                    "AND b.comparability_key = g.comparability_key "
                    f"WHERE {VISIBLE} AND r.role = 'guest' "
                    "ORDER BY r.created DESC, r.id DESC, g.test_id LIMIT 50",
                    [],
                ),
            ],
            kind="page",
            notes="answer overall and per storage + summary per test + a page",
            live_sql=[
                (
                    "SELECT g.test_id, count(*), "
                    "percentile_cont(0.5) WITHIN GROUP (ORDER BY "
                    "g.iops_mean / NULLIF(b.iops_mean, 0)), "
                    "avg(g.bw_bytes_mean / NULLIF(b.bw_bytes_mean, 0)) "
                    "FROM results_run r JOIN results_result g ON g.run_id = r.id "
                    "JOIN results_result b ON b.run_id = r.baseline_id "
                    "AND b.comparability_key = g.comparability_key "
                    f"WHERE {VISIBLE} AND r.role = 'guest' GROUP BY g.test_id",
                    [],
                ),
                *_overhead_answer_sql(
                    *ctx.get("overhead_workload", (test, key, "iops_mean"))
                ),
            ],
        ),
        Endpoint(
            "API aggregates",
            f"/api/v1/aggregates/?test_id={test}&metric=iops&group_by=cache_mode",
            [],
            notes="spread per cache mode over every listed run of a test",
            live_sql=[
                (
                    "SELECT x.comparability_key, count(*) FROM results_result x "
                    "JOIN results_run r ON r.id = x.run_id "
                    f"WHERE {VISIBLE} AND NOT r.suspect AND x.test_id = %s "
                    "AND x.comparable AND x.iops_mean IS NOT NULL "
                    "GROUP BY 1 ORDER BY 2 DESC LIMIT 1",
                    [test],
                ),
                (
                    "SELECT r.cache_mode, count(x.iops_mean), min(x.iops_mean), "
                    "percentile_cont(ARRAY[0.25, 0.5, 0.75]) WITHIN GROUP "
                    "(ORDER BY x.iops_mean), max(x.iops_mean) "
                    "FROM results_result x JOIN results_run r ON r.id = x.run_id "
                    f"WHERE {VISIBLE} AND NOT r.suspect AND x.test_id = %s "
                    "AND x.comparable AND x.iops_mean IS NOT NULL "
                    "AND x.comparability_key = %s "
                    "GROUP BY GROUPING SETS ((), (r.cache_mode))",
                    [test, ctx["key"]],
                ),
            ],
        ),
        Endpoint(
            "API similar systems",
            f"/api/v1/runs/{run}/similar/?test_id={test}&metric=iops",
            # The run's own figure.
            [
                (
                    "SELECT x.iops_mean, x.comparability_key, h.disk_type "
                    "FROM results_result x JOIN results_run r ON r.id = x.run_id "
                    "LEFT JOIN results_hardware h ON h.id = r.hardware_id "
                    "WHERE x.run_id = %s AND x.test_id = %s",
                    [run, test],
                ),
            ],
            notes="where a run stands in the population of its disk type",
            live_sql=[
                (
                    "SELECT x.iops_mean FROM results_result x "
                    "JOIN results_run r ON r.id = x.run_id "
                    "LEFT JOIN results_hardware h ON h.id = r.hardware_id "
                    f"WHERE {VISIBLE} AND NOT r.suspect AND x.comparability_key = %s "
                    "AND x.comparable AND x.iops_mean IS NOT NULL "
                    "AND h.disk_type = %s ORDER BY x.iops_mean",
                    [ctx["key"], ctx["disk_type"]],
                ),
            ],
        ),
        Endpoint(
            "API population, filtered",
            f"/api/v1/population/?test_id={test}&metric=iops&role=guest"
            f"&disk_type={ctx['disk_type']}",
            [],
            notes="figures and guest/host of one test on one disk type",
            live_sql=_population_sql(test, ctx["key"], ctx["disk_type"]),
        ),
        Endpoint(
            "API population compare",
            f"/api/v1/population/compare/?test_id={test}&metric=iops&role=guest"
            "&a=cache_mode%3Dnone&b=cache_mode%3Dwriteback",
            [],
            notes="writeback vs none over every guest run",
            live_sql=_cache_answer_sql(
                test, ctx["key"], "iops_mean", ("none", "writeback")
            ),
        ),
        Endpoint(
            "API hardware list",
            "/api/v1/hardware/",
            [
                # The answer's count: hardware rows with a listed run (one
                # probe per hardware row), then the page's rows, each with
                # its listed runs counted.
                (
                    "SELECT count(*) FROM results_hardware h WHERE EXISTS "
                    "(SELECT 1 FROM results_run r WHERE r.hardware_id = h.id "
                    f"AND {VISIBLE})",
                    [],
                ),
                (
                    "SELECT h.*, c.name, d.name, (SELECT count(*) "
                    f"FROM results_run r WHERE r.hardware_id = h.id AND {VISIBLE}) "
                    "FROM results_hardware h "
                    "LEFT JOIN results_cpumodel c ON c.id = h.cpu_model_id "
                    "LEFT JOIN results_diskmodel d ON d.id = h.disk_model_id "
                    "WHERE EXISTS (SELECT 1 FROM results_run r "
                    f"WHERE r.hardware_id = h.id AND {VISIBLE}) "
                    "ORDER BY h.id LIMIT 50",
                    [],
                ),
            ],
        ),
        # A filter that fills the page at every scale from 10k (a third of
        # the runs; 137 at 10k): the same answer, 100 runs and about 10 MB,
        # at each scale.  With cache_mode=none as well it matched 13 runs at
        # 10k, so its growth compared 13 runs with 100.
        Endpoint(
            "API export JSON, filtered",
            "/api/v1/runs/export/?format=json&disk_type=hdd",
            [
                (
                    f"SELECT {EXPORT_COLS}, x.stats FROM results_result x "
                    f"JOIN {RUN_JOIN} ON r.id = x.run_id WHERE x.run_id IN "
                    f"(SELECT r.id FROM {RUN_JOIN} WHERE {VISIBLE} "
                    "AND h.disk_type = 'hdd' "
                    "ORDER BY r.id LIMIT 100) ORDER BY x.run_id, x.test_id",
                    [],
                ),
            ],
            kind="export",
            notes="one page (100 runs) of a cursor-paginated export",
        ),
        Endpoint(
            "API export CSV, all (page 1)",
            "/api/v1/runs/export/?format=csv",
            [
                (
                    f"SELECT {EXPORT_COLS} FROM results_result x "
                    f"JOIN {RUN_JOIN} ON r.id = x.run_id WHERE x.run_id IN "
                    f"(SELECT r.id FROM results_run r WHERE {VISIBLE} "
                    "ORDER BY r.id LIMIT 100) ORDER BY x.run_id, x.test_id",
                    [],
                ),
            ],
            kind="export",
            notes="first page (100 runs) of the cursor-paginated export",
        ),
    ]
    return out


def full_export_sql() -> str:
    return (
        f"SELECT {EXPORT_COLS} FROM results_result x JOIN {RUN_JOIN} "
        f"ON r.id = x.run_id WHERE {VISIBLE} ORDER BY x.run_id, x.test_id"
    )


def pick_context() -> dict:
    """The runs the endpoints ask about: a recent public guest with a
    baseline, and runs of the same seed for comparisons."""
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute(
            "SELECT r.id, r.baseline_id, h.disk_type FROM results_run r "
            "LEFT JOIN results_hardware h ON h.id = r.hardware_id "
            f"WHERE {VISIBLE} AND r.role = 'guest' AND r.baseline_id IS NOT NULL "
            "ORDER BY r.created DESC, r.id DESC LIMIT 1"
        )
        guest, host, disk_type = cur.fetchone()
        cur.execute(
            f"SELECT r.id FROM results_run r WHERE {VISIBLE} AND r.role = 'guest' "
            "ORDER BY r.created DESC, r.id DESC LIMIT 10"
        )
        compare = [row[0] for row in cur.fetchall()]
        cur.execute(
            "SELECT test_id, comparability_key FROM results_result "
            "WHERE run_id = %s AND iops_mean IS NOT NULL "
            "ORDER BY (test_id = 'fio-rand-read-4k-q1t1') DESC, test_id LIMIT 1",
            [guest],
        )
        test_id, key = cur.fetchone()
        cur.execute(f"SELECT count(*) FROM results_run r WHERE {VISIBLE}")
        pages = -(-cur.fetchone()[0] // 50)
        # The listed guests random comparisons are drawn from, each with its
        # host baseline (None if it has none or the host is not listed).
        cur.execute(
            "SELECT r.id, b.id FROM results_run r LEFT JOIN results_run b "
            "ON b.id = r.baseline_id AND b.visibility = 'public' AND NOT b.hidden "
            f"WHERE {VISIBLE} AND r.role = 'guest'"
        )
        guests = dict(cur.fetchall())
    from benchdb.results import answers
    from benchdb.results.metrics import metric_column

    def workload(question: str) -> tuple:
        """(test id, its most common key, metric column) the report shows
        first: ``answers.workloads``' first option."""
        options = answers.workloads.live(question)
        if not options:
            return (test_id, key, "iops_mean")
        chosen = options[0]
        with connection.cursor() as cur:
            cur.execute(
                "SELECT comparability_key FROM results_result x JOIN results_run r "
                f"ON r.id = x.run_id WHERE {VISIBLE} AND NOT r.suspect "
                "AND x.test_id = %s AND x.comparable GROUP BY 1 "
                "ORDER BY count(*) DESC, 1 LIMIT 1",
                [chosen["test_id"]],
            )
            top = cur.fetchone()
        return (
            chosen["test_id"],
            top[0] if top else key,
            metric_column(chosen["metric"]),
        )

    return {
        "cache_workload": workload("cache"),
        "overhead_workload": workload("overhead"),
        "guest": guest,
        "host": host,
        "disk_type": disk_type,
        "compare": compare,
        "test_id": test_id,
        "key": key,
        "page": max(1, min(200, pages)),
        "guests": guests,
    }


def random_set(ep: Endpoint, guests: dict, rng) -> list[int]:
    """A random run set for a random comparison row: ``ep.random_runs``
    distinct listed guests, or (PAIR) one with a listed host and that host."""
    if ep.random_runs == PAIR:
        guest = rng.choice([g for g, host in guests.items() if host])
        return [guest, guests[guest]]
    return rng.sample(sorted(guests), min(ep.random_runs, len(guests)))


def baselines_of(ids: list[int], guests: dict) -> list:
    """The hosts of ``ids`` in the same order (None where none is listed)."""
    return [guests.get(i) for i in ids]
