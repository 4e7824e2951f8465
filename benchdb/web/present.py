"""Presentation: what the pages show, built from the read path's data.

Plain functions, no queries: they take runs and comparison dicts (from
``results.compare``) and return what templates and charts need: which
settings differ between runs (and label the runs by them), and the charts of
a comparison grouped as the suite groups its tests, with each bar's interval
and its verdict against the reference.
"""

from __future__ import annotations

import re
from collections import defaultdict
from functools import cache
from html import escape  # as django.utils.html.escape, without its lazy wrapper

from django.template.defaultfilters import date, floatformat
from django.urls import reverse
from django.utils.encoding import force_str
from django.utils.formats import localize
from django.utils.text import slugify
from django.utils.timezone import template_localtime

from benchdb.results import vocab
from benchdb.results.metrics import main_metric, workload_test_id
from benchdb.results.reports import UNSAFE_FASTER
from benchdb.results.stats import (  # centre: the figure a bar or headline shows
    centre,
    too_noisy_text,
    too_wide,
)
from benchdb.web.templatetags.benchdb_format import (
    human,
    interval_text,
    loses_data,
    metric_axis,
    metric_scale,
    metric_unit,
    metric_words,
    pct,
    too_noisy,
)
from benchdb_agent import suite as agent_suite

# What describes a run's environment, in reading order: (label, getter).
ATTRIBUTES = [
    *vocab.DESCRIPTION,
    ("Suite", lambda r: f"{r.suite_id} {r.suite_version} {r.profile}".strip()),
    ("Agent", lambda r: r.agent_version),
    ("Source", lambda r: r.get_source_display()),
]
# Short forms for chart labels (the table says the long ones).
SHORT = {
    "Role": lambda r: r.role,
    "Cache mode": lambda r: f"cache={r.cache_mode}",
    "AIO": lambda r: f"aio={r.aio_mode}",
    "Image format": lambda r: r.image_format,
    "Storage": lambda r: r.storage_backend,
    "Bus": lambda r: r.disk_bus,
}
LABEL_PARTS = 3
# What names a run best in a chart legend, first.
LABEL_PRIORITY = {
    label: i
    for i, label in enumerate(
        [
            "Cache mode",
            "Storage",
            "Image format",
            "Bus",
            "AIO",
            "I/O thread",
            "Role",
            "Platform",
            "Disk",
            "Disk type",
            "RAID",
            "Guest filesystem",
            "Host filesystem",
        ]
    )
}
COLUMN_TAGS = vocab.COLUMN_TAGS


def differences(runs: list) -> dict:
    """Which settings and tags differ between the runs and which are shared.

    ``differ``: [{"label", "values": [per run]}]; ``same``: [{"label",
    "value"}] (unknown/empty values left out of ``same``); ``labels``: run
    pk -> "#id" plus what tells it apart.
    """
    differ, same = [], []
    rows = [(label, [get(r) or "" for r in runs]) for label, get in ATTRIBUTES]
    # Tags that only repeat a column (cache_mode=none) add nothing.
    tag_keys = sorted({k for r in runs for k in (r.tags or {})} - COLUMN_TAGS)
    for key in tag_keys:
        rows.append((f"tag {key}", [str((r.tags or {}).get(key, "")) for r in runs]))
    short_parts = defaultdict(list)
    for label, values in sorted(
        rows, key=lambda row: LABEL_PRIORITY.get(row[0], len(LABEL_PRIORITY))
    ):
        if len(set(values)) > 1:
            for run, value in zip(runs, values, strict=True):
                text = SHORT[label](run) if label in SHORT else value
                short_parts[run.pk].append(text or f"no {label.lower()}")
    for label, values in rows:
        if len(set(values)) > 1:
            differ.append({"label": label, "values": values})
        elif values and values[0] and values[0].lower() not in ("unknown", "—"):
            same.append({"label": label, "value": values[0]})
    labels = {}
    for run in runs:
        parts = short_parts.get(run.pk, [])[:LABEL_PARTS]
        parts = [p[:40] for p in parts]
        labels[run.pk] = f"#{run.pk} " + (" · ".join(parts) if parts else str(run))
    if len(set(labels.values())) < len(labels):  # differ only beyond the parts
        labels = {r.pk: f"#{r.pk} {r}" for r in runs}
    return {"differ": differ, "same": same, "labels": labels}


GROUP_TITLES = {
    "fio-seq": "Sequential transfers",
    "fio-random": "Random 4 KiB I/O",
    "ioping": "Latency (ioping)",
    "dd": "dd",
    "fio-fsync": "Writes with fsync",
    "fio-numjobs": "Parallel jobs",
    "fio-iodepth-sweep": "Queue-depth sweep",
}
GROUP_ORDER = list(GROUP_TITLES)


def _slug(group: str) -> str:
    """An element id for a test group (the group comes from the bundle)."""
    return "group-" + (slugify(group) or "other")


def group_slug(test: dict) -> str:
    """The slug of the group a comparison's test is shown in."""
    return _slug(test["group"] or "other")


def mark(entry: dict, is_reference: bool, unsafe: bool = False) -> str:
    """A bar's significance against the reference, in one or two characters
    plus a word: ▲ better, ▼ worse, = same, ? cannot tell; ⚠ for a run
    faster than the reference that is ``unsafe`` (``loses_data``)."""
    if is_reference:
        return "reference"
    verdict = entry.get("verdict")
    better = entry.get("better")
    if verdict in ("faster", "better") or (verdict == "significant" and better):
        # Never "▲ better" (pages colour it green): the reports' words.
        return f"⚠ {UNSAFE_FASTER}:" if unsafe else "▲ better"
    if verdict in ("slower", "worse") or (verdict == "significant" and better is False):
        return "▼ worse"
    if verdict == "equivalent":
        return "= same"
    if verdict in ("within noise",):
        return "≈ within noise"
    if verdict:
        return "? cannot tell"
    return ""


def _interval(entry: dict) -> tuple:
    low, high = entry.get("ci95_low"), entry.get("ci95_high")
    if low is None or high is None:
        return None, None
    return max(low, 0.0), max(high, 0.0)  # a rate or a time is never negative


def _depth(test_id: str) -> int | None:
    try:
        return int(agent_suite.get_test(test_id).get("iodepth"))
    except (KeyError, TypeError, ValueError):
        return None


def _family(test: dict) -> str:
    """ "Random read 4 KiB" for "Random read 4 KiB Q16T1"."""
    title = test["title"]
    head, _, tail = title.rpartition(" Q")
    return head if head and tail[:1].isdigit() else test["test_id"].split("-q")[0]


def chart_groups(data: dict, labels: dict, rows: bool = True) -> list[dict]:
    """The comparison's tests as groups of charts.

    Each group: title, the tests' rows (for its table; empty unless
    ``rows``) and charts.  A chart
    is one figure (metric) over the group's tests: horizontal bars, one
    category per test (full title), one dataset per run labelled by what
    differs, each bar with its interval (never below zero) and its mark
    against the reference.  The queue-depth sweep becomes line charts
    (IOPS and latency against depth, numeric order, interval bands).
    """
    reference = data["reference"]
    run_ids = [r["id"] for r in data["runs"]]
    unsafe = {r["id"] for r in data["runs"] if loses_data(r.get("cache_mode"))}
    by_group = defaultdict(list)
    for test in data["tests"]:
        by_group[test["group"] or "other"].append(test)
    groups = []
    order = sorted(
        by_group,
        key=lambda g: (GROUP_ORDER.index(g) if g in GROUP_ORDER else 99, g),
    )
    for name in order:
        tests = by_group[name]
        table = _rows(tests, labels, reference, unsafe) if rows else []
        group = {
            "name": name,
            "slug": _slug(name),
            "title": GROUP_TITLES.get(name, name),
            "count": len(tests),
            "rows": table,
            "bars": [],
            "lines": [],
        }
        if name == "fio-iodepth-sweep":
            group["lines"] = _sweep_charts(tests, labels, run_ids)
        else:
            group["bars"] = _bar_charts(tests, labels, run_ids, reference, unsafe)
        groups.append(group)
    return groups


def _rows(
    tests: list[dict], labels: dict, reference: int, unsafe=frozenset()
) -> list[dict]:
    return [
        _row(test, m, e, labels[e["run"]], e["run"] == reference, e["run"] in unsafe)
        for test in tests
        for m in test["metrics"]
        for e in m["runs"]
    ]


def _row(
    test: dict, m: dict, e: dict, label: str, is_reference: bool, unsafe=False
) -> dict:
    """One table row (templates/jinja2/web/_compare_rows.html), every cell's
    text formatted here: a full comparison has hundreds of rows, and Python
    formats them far faster than template filters do."""
    metric = m["metric"]
    interval = interval_text(e, metric)
    if is_reference:
        delta = "reference"
    elif e.get("delta_percent") is not None:
        delta = f"{e['delta_percent']:+.1f}%"
    else:
        delta = "—"
    verdict = e.get("verdict_text") or ""
    if not verdict and e.get("verdict"):
        verdict = e["verdict"]
        if e.get("p_value") is not None:
            verdict += f" (p = {e['p_value']:.3f})"
    overhead = (e.get("overhead") or {}).get("text") or ""
    the_mark = mark(e, is_reference, unsafe)
    return {
        "test": test,
        "metric": m,
        "entry": e,
        "label": label,
        "data_mean": repr(e["mean"]),
        "data_gmean": repr(e["gmean"]),
        "mark": "" if the_mark == "reference" else the_mark,
        "cells": {
            "metric": metric_words(metric),
            "mean": _centre_text(e, metric),
            "interval": interval,
            "delta": delta,
            "verdict": verdict,
            "overhead": overhead,
        },
        "css": "verdict-"
        + (e.get("verdict") or "reference").replace(" ", "-")
        + (" safety-unsafe" if unsafe else ""),
        "unsafe": unsafe,
        "noisy": too_noisy(e),
    }


def _centre_text(e: dict, metric: str) -> str:
    """The table's figure: the geometric mean, or the arithmetic one said so."""
    if e.get("gmean") is None and e.get("mean") is not None:
        return f"{human(e['mean'], metric)} (arithmetic mean)"
    return human(centre(e), metric)


def charted_figures(test_id: str, group: str, measured: list[str]) -> set[str]:
    """The figures of a test the compare page's charts show: the one
    ``_chosen`` picks (the suite's main figure, else the first measured);
    every one in the queue-depth sweep (its curves add the latency)."""
    if (group or "other") == "fio-iodepth-sweep":
        return set(measured)
    main = main_metric(test_id)
    if main in measured:
        return {main}
    return set(measured[:1])


def _chosen(test: dict) -> dict | None:
    metrics = {m["metric"]: m for m in test["metrics"]}
    return metrics.get(test["main_metric"]) or (
        test["metrics"][0] if test["metrics"] else None
    )


def _bar_charts(tests, labels, run_ids, reference, unsafe=frozenset()) -> list[dict]:
    """Horizontal bars per figure: a category per test, a dataset per run
    (``_bar_dataset``), each with its mark against the reference; a run that
    loses flushed data (``unsafe``) is never marked "better"."""
    by_metric = defaultdict(list)
    for test in tests:
        chosen = _chosen(test)
        if chosen is not None:
            by_metric[chosen["metric"]].append((test, chosen))
    charts = []
    for metric, pairs in by_metric.items():
        scale = metric_scale(metric)
        datasets = []
        for rid in run_ids:
            entries = [
                next((e for e in m["runs"] if e["run"] == rid), {}) for _t, m in pairs
            ]
            dataset = _bar_dataset(labels[rid], entries, metric, scale)
            dataset["marks"] = [
                mark(e, rid == reference, rid in unsafe) if e else "" for e in entries
            ]
            dataset["unsafe"] = rid in unsafe
            datasets.append(dataset)
        charts.append(
            {
                "title": metric_words(metric),
                "axis": metric_axis(metric),
                "unit": metric_unit(metric),
                "categories": [t["title"] for t, _m in pairs],
                "datasets": datasets,
            }
        )
    return charts


def _sweep_charts(tests, labels, run_ids) -> list[dict]:
    """fio-plot's view of a queue-depth sweep: per family (random read 4 KiB,
    sequential read 256 KiB), the main figure and the mean latency against
    depth, log2 axis, one line per run with its 95% band; each point with
    the figure printed on it (as the bars' ``texts``) and ``noisy`` when its
    interval is too wide to mean anything (then no band there)."""
    families = defaultdict(list)
    for test in tests:
        depth = _depth(test["test_id"])
        if depth is not None:
            families[_family(test)].append((depth, test))
    charts = []
    for family, items in families.items():
        items.sort(key=lambda item: item[0])  # numerically: 1, 2, 4 … 128
        metrics = [_chosen(items[0][1]) and _chosen(items[0][1])["metric"]]
        metrics += ["lat_mean_ns"] if metrics[0] != "lat_mean_ns" else []
        for metric in [m for m in metrics if m]:
            scale = metric_scale(metric)
            series = []
            for rid in run_ids:
                points = []
                for depth, test in items:
                    m = next(
                        (m for m in test["metrics"] if m["metric"] == metric), None
                    )
                    e = m and next((e for e in m["runs"] if e["run"] == rid), None)
                    if not e or centre(e) is None:
                        continue
                    wide = too_noisy(e)
                    low, high = (None, None) if wide else _interval(e)
                    points.append(
                        {
                            "x": depth,
                            "y": centre(e) / scale,
                            "low": None if low is None else low / scale,
                            "high": None if high is None else high / scale,
                            "text": human(centre(e), metric),
                            "noisy": wide,
                        }
                    )
                if points:
                    series.append({"label": labels[rid], "points": points})
            if series:
                charts.append(
                    {
                        "title": f"{family}: {metric_words(metric)} by queue depth",
                        "axis": metric_axis(metric),
                        "series": series,
                    }
                )
    return charts


def main_summary(result, metric: str | None) -> dict:
    """A stored result's summary (mean, interval, n) of one figure, main
    direction; {} when it has none."""
    if result is None or not metric:
        return {}
    stats = result.stats or {}
    direction = stats.get("main_direction")
    return ((stats.get("directions") or {}).get(direction) or {}).get(metric) or {}


def repeat_cells(run, result, metric: str | None) -> list[dict]:
    """A run page's repeats column for one result: each repeat's figure in
    the main direction (``human``, as the ``get_metric`` filter writes it)
    and the link to its raw output when one is stored.  ``result.records``
    and ``result.raw_formats`` come from ``reads.attach_repeats``."""
    direction = (result.stats or {}).get("main_direction")
    sentinel = "918273645"
    head, tail = reverse("raw-output", args=[run.pk, result.pk, sentinel]).split(
        sentinel
    )
    return [
        {
            "value": human(m.get(metric), metric) if metric else "—",
            "raw": f"{head}{m['repeat']}{tail}"
            if m["repeat"] in result.raw_formats
            else None,
        }
        for m in result.records
        if m["direction"] == direction
    ]


def run_groups(rows: list[dict], run, baseline=None) -> list[dict]:
    """A run page's results as the suite's groups: per group its rows and one
    horizontal bar chart per figure (a category per test, full titles), the
    run's bars and, beside them, its host baseline's where there is one."""
    by_group = defaultdict(list)
    for row in rows:
        by_group[row["result"].group or "other"].append(row)
    order = sorted(
        by_group,
        key=lambda g: (GROUP_ORDER.index(g) if g in GROUP_ORDER else 99, g),
    )
    groups = []
    for row in rows:
        row["cells"] = result_cells(row)
    for name in order:
        members = by_group[name]
        by_metric = defaultdict(list)
        for row in members:
            if row["metric"] and row["summary"].get("mean") is not None:
                by_metric[row["metric"]].append(row)
        charts = []
        for metric, chart_rows in by_metric.items():
            scale = metric_scale(metric)
            datasets = [("summary", f"#{run.pk} this run")]
            if baseline is not None and any(r["host_summary"] for r in chart_rows):
                datasets.append(("host_summary", f"#{baseline.pk} host baseline"))
            charts.append(
                {
                    "title": metric_words(metric),
                    "axis": metric_axis(metric),
                    "unit": metric_unit(metric),
                    "categories": [
                        r["result"].title or r["result"].test_id for r in chart_rows
                    ],
                    "datasets": [
                        _bar_dataset(label, [r[key] for r in chart_rows], metric, scale)
                        for key, label in datasets
                    ],
                }
            )
        groups.append(
            {
                "name": name,
                "slug": _slug(name),
                "title": GROUP_TITLES.get(name, name),
                "count": len(members),
                "rows": members,
                "bars": charts,
            }
        )
    return groups


def result_cells(row: dict) -> dict:
    """The texts of a run page table's row (``run_groups``' rows; written by
    templates/jinja2/web/_result_rows.html): the figure, its interval (or the
    range of the repeats and why), n and the guest/host figure."""
    summary, metric = row["summary"], row["metric"]
    mean, gmean = summary.get("mean"), summary.get("gmean")
    low, high = summary.get("ci95_low"), summary.get("ci95_high")
    n = summary.get("n")
    if gmean is not None:
        centre_text = human(gmean, metric)
    elif mean is not None:
        centre_text = human(mean, metric) + " (arithmetic mean)"
    else:
        centre_text = human(mean, metric)
    note = ""
    if low is not None and high is not None and too_noisy(summary):
        interval = interval_text(summary, metric)
    elif low is not None and _greater(low, 0):
        interval = f"{human(low, metric)} – {human(high, metric)}"
    elif summary.get("min") is not None:
        interval = (
            f"{human(summary['min'], metric)} – {human(summary.get('max'), metric)}"
        )
        few = ": not enough repeats to estimate noise" if _less(n, 3) else ""
        note = f"min–max{few}"
    else:
        interval = "—"
    overhead = row["overhead"]
    if overhead is not None and overhead.get("text"):
        vs_host = str(overhead["text"])
    else:
        vs_host = pct(overhead)
    return {
        "data_mean": repr(summary.get("mean", "")),
        "data_gmean": repr(summary.get("gmean", "")),
        "metric": metric_words(metric),
        "centre": centre_text,
        "interval": interval,
        "interval_note": note,
        "n": localize(n) if n else "—",
        "vs_host": vs_host,
    }


def _greater(a, b) -> bool:
    """The template's ``a > b``: false when they do not compare."""
    try:
        return a > b
    except TypeError:
        return False


def _less(a, b) -> bool:
    try:
        return a < b
    except TypeError:
        return False


def _bar_dataset(label: str, summaries: list[dict], metric: str, scale: float) -> dict:
    """One run's bars: per test its figure (``centre``) in the shown unit,
    the text printed on the bar (as the table writes it), its 95% interval
    (None when there is none, or when it is too wide to mean anything:
    ``noisy`` then says so and no whisker is drawn)."""
    values, lows, highs, texts, noisy = [], [], [], [], []
    for summary in summaries:
        value = centre(summary)
        wide = too_noisy(summary)
        low, high = (None, None) if wide else _interval(summary)
        values.append(None if value is None else value / scale)
        lows.append(None if low is None else low / scale)
        highs.append(None if high is None else high / scale)
        texts.append("" if value is None else human(value, metric))
        noisy.append(wide)
    return {
        "label": label,
        "values": values,
        "low": lows,
        "high": highs,
        "texts": texts,
        "noisy": noisy,
        "marks": ["" for _ in summaries],
    }


# The two figures people quote first (KDiskMark's RND4K Q32T1 and SEQ1M Q8T1).
HEADLINES = [
    ("fio-rand-read-4k-q32t1", "iops", "4K random read"),
    ("fio-seq-read-1m-q8t1", "bw_bytes", "1M sequential read"),
    ("fio-rand-write-4k-q32t1", "iops", "4K random write"),
    ("fio-seq-write-1m-q8t1", "bw_bytes", "1M sequential write"),
]


def headlines(rows: list[dict], published: bool = False) -> list[dict]:
    """The headline figures of a run page, with the overhead where paired.
    A published source's test (``published``) is the headline test its
    workload is (``metrics.workload_test_id``), as the lists find it."""

    def test_of(result) -> str:
        if not published:
            return result.test_id
        direction = (result.stats or {}).get("main_direction")
        return workload_test_id(result.tool, direction, result.options)

    by_test = {}
    for row in rows:
        by_test.setdefault(test_of(row["result"]), row)
    out = []
    for test_id, metric, label in HEADLINES:
        row = by_test.get(test_id)
        if row is None or row["metric"] != metric:
            continue
        out.append(
            {
                "label": label,
                "metric": metric,
                "mean": centre(row["summary"]),
                "arithmetic": row["summary"].get("gmean") is None,
                "n": row["summary"].get("n"),
                "overhead": row["overhead"],
            }
        )
    return out


def overhead_cell(overhead: dict | None) -> str:
    """The list column's text: "−38.0% (−42.1…−33.6%)", or "n/a" and why
    when there is no interval (fewer than 3 repeats on a side), or "too
    noisy to estimate (n repeats)" when the interval is too wide to mean
    anything (``stats.too_wide``), never a bare figure that looks certain."""
    if not overhead or overhead.get("ratio") is None:
        return "—"
    if overhead.get("low") is None:
        return f"n/a ({NOT_ENOUGH_SHORT})"
    if too_wide(overhead["low"], overhead["high"]):
        n = min(overhead.get("n_guest") or 0, overhead.get("n_host") or 0)
        return too_noisy_text(n)
    low = (overhead["low"] - 1) * 100
    high = (overhead["high"] - 1) * 100
    return f"{overhead['percent']:+.1f}% ({low:+.1f}…{high:+.1f}%)"


NOT_ENOUGH_SHORT = "fewer than 3 repeats: no interval"


FACET_WORDS = vocab.LABELS


def chips(params, facets: list[dict]) -> list[dict]:
    """Every active filter as a removable chip: {label, href}; and, in
    ``facets``, every chosen value kept even when it now matches nothing (a
    filter never vanishes from the menu while it is on)."""
    labels = {}
    for facet in facets:
        facet["label"] = FACET_WORDS.get(facet["name"], facet["label"])
        shown = {o["value"] for o in facet["options"]}
        for value in params.getlist(facet["name"]):
            if value not in shown:
                facet["options"].append(
                    {"value": value, "label": value, "n": 0, "checked": True}
                )
        for o in facet["options"]:
            labels[(facet["name"], o["value"])] = o["label"]
    out = []
    for name in params:
        if name in ("page", "ordering"):
            continue
        for value in params.getlist(name):
            if not value:
                continue
            rest = params.copy()
            rest.pop("page", None)
            others = [v for v in rest.getlist(name) if v != value]
            if others:
                rest.setlist(name, others)
            else:
                rest.pop(name, None)
            words = FACET_WORDS.get(name, "Search" if name == "q" else name)
            out.append(
                {
                    "label": f"{words}: {labels.get((name, value), value)}",
                    "href": "?" + rest.urlencode(),
                }
            )
    return out


# What Markdown (CommonMark and GitHub's tables) reads as markup in a cell.
MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]<>|~!#])")


def markdown(groups: list[dict]) -> str:
    """The comparison as a Markdown table for a forum post: each test's main
    figure (the one its chart shows), one line per run."""

    def cell(text) -> str:
        # Titles and labels are the uploader's words: pasted into a forum,
        # neither HTML (<script>, <img onerror>) nor Markdown (links,
        # images, emphasis) may come alive, nor a | end the cell.
        text = escape(" ".join(str(text).split()), quote=False)
        return MARKDOWN_SPECIAL.sub(r"\\\1", text)

    # An interval too wide to mean anything (``too_noisy``) leaves its cell
    # empty and says so in a column of its own: never a number to quote.
    lines = [
        "| test | figure | run | geometric mean | 95% interval | too noisy to "
        "estimate | vs reference | verdict |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for group in groups:
        for row in group["rows"]:
            chosen = _chosen(row["test"])
            if chosen is None or row["metric"]["metric"] != chosen["metric"]:
                continue
            c = row["cells"]
            noisy = too_noisy(row["entry"])
            n = row["entry"].get("n")
            lines.append(
                "| "
                + " | ".join(
                    cell(x)
                    for x in (
                        row["test"]["title"],
                        c["metric"],
                        row["label"],
                        c["mean"],
                        "" if noisy else c["interval"],
                        f"yes ({n} repeats)" if noisy else "",
                        c["delta"],
                        c["verdict"] or row["entry"].get("note") or "",
                    )
                )
                + " |"
            )
    return "\n".join(lines)


# What a repeated warning code means, said once above its list.
WARNING_GIST = {
    "unstable": "the spread of the repeats stayed high (coefficient of variation"
    " above 10%) up to the repeat cap: these figures are not stable",
    "test-failed": "the tool failed: these tests have no figures",
    "buffered-io": "measured through the page cache, not the disk",
}


def group_warnings(warnings) -> list[dict]:
    """The run's warnings grouped by code, in the order first seen: a code
    that recurs (one ``unstable`` per test, say) becomes one line with its
    count and the tests' own messages folded below it."""
    groups: dict[str, dict] = {}
    for w in warnings or []:
        if not isinstance(w, dict):
            continue
        code = str(w.get("code") or "")
        key = code or f"#{len(groups)}"
        group = groups.setdefault(
            key, {"code": code, "gist": WARNING_GIST.get(code, ""), "messages": []}
        )
        group["messages"].append(str(w.get("message") or code))
    for group in groups.values():
        group["count"] = len(group["messages"])
    return list(groups.values())


def mark_test_warnings(rows: list[dict], warnings) -> None:
    """``row["badges"]``: what the agent said about that test (a warning
    naming it, a partial or failed status, buffered I/O), as short words."""
    by_test = defaultdict(list)
    for w in warnings or []:
        if isinstance(w, dict) and w.get("test_id"):
            by_test[w["test_id"]].append(str(w.get("code") or "warning"))
    for row in rows:
        result = row["result"]
        badges = list(by_test.get(result.test_id, []))
        stats = result.stats or {}
        if stats.get("status") in ("partial", "failed"):
            badges.append(stats["status"])
        if stats.get("buffered"):
            badges.append("buffered")
        row["badges"] = badges


# The browse table's rows: each cell's text, written by templates/jinja2/
# web/_run_rows.html (escaped there).


@cache
def _choice_labels(model, field: str) -> dict:
    return dict(model._meta.get_field(field).flatchoices)


def display(obj, field: str) -> str:
    """``obj.get_<field>_display()`` from its choices read once, not a dict
    of them built per call: the list rows' labels."""
    value = getattr(obj, field)
    return force_str(
        _choice_labels(type(obj), field).get(value, value), strings_only=True
    )


def browse_rows(runs) -> list[dict]:
    """The browse table's rows for a page of runs (``reads.browse_page``)."""
    out = []
    for run in runs:
        hardware = run.hardware
        iops, bw = run.rand4k_iops, run.seq1m_bw
        out.append(
            {
                "id": run.pk,
                "url": run.get_absolute_url(),
                "name": str(run),
                "suspect": run.suspect,
                "published": run.source == "published",
                "role_text": display(run, "role"),
                "platform_text": getattr(run, "platform_label", "")
                or display(run, "platform"),
                "cache_text": run.cache_mode,
                "storage": display(run, "storage_backend"),
                "format_bus": f"{run.image_format} · {run.disk_bus}",
                "disk": (display(hardware, "disk_type") if hardware else "") or "—",
                "rand4k_iops": repr(iops),
                "rand4k_text": floatformat(iops, "0g") if iops is not None else "—",
                "seq1m_text": human(bw, "bw_bytes") if bw is not None else "—",
                "vs_host": overhead_cell(run.rand4k_overhead),
                "created": date(template_localtime(run.created), "Y-m-d"),
            }
        )
    return out


def home_rows(runs) -> list[dict]:
    """The home page's latest runs (``reads.home_summary``, hosts labelled
    by ``reads.label_host_platforms``) as the text its table shows (Jinja2:
    ``web/_home_rows.html``)."""
    out = []
    for run in runs:
        hardware = run.hardware
        out.append(
            {
                "url": run.get_absolute_url(),
                "name": str(run),
                "role_text": display(run, "role"),
                "platform_text": getattr(run, "platform_label", "")
                or display(run, "platform"),
                "cache_text": run.cache_mode,
                "storage": display(run, "storage_backend"),
                "disk": (display(hardware, "disk_type") if hardware else "") or "—",
                "source": display(run, "source"),
                "rand4k_text": human(run.rand4k_iops, "iops"),
                "seq1m_text": human(run.seq1m_bw, "bw_bytes"),
            }
        )
    return out


def overhead_rows(rows: list[dict]) -> list[dict]:
    """The overhead report's run-by-run rows (``reads.overhead_rows``) as the
    text its table shows (Jinja2: ``web/_overhead_rows.html``).  A run's
    address and name once per run, not once per test."""
    named = {}

    def name(run) -> tuple[str, str]:
        if run.pk not in named:
            named[run.pk] = (run.get_absolute_url(), str(run))
        return named[run.pk]

    out = []
    for row in rows:
        guest, host, metric = row["guest"], row["host"], row["metric"]
        (guest_url, guest_name), (host_url, host_name) = name(guest), name(host)
        out.append(
            {
                "guest_url": guest_url,
                "guest": guest_name,
                "guest_suspect": guest.suspect,
                "host_url": host_url,
                "host": host_name,
                "host_suspect": host.suspect,
                "test": row["test"].title or row["test"].test_id,
                "metric": metric_words(metric),
                "guest_mean": human(row["guest_mean"], metric),
                "host_mean": human(row["host_mean"], metric),
                "overhead": pct(row["overhead"]),
                "interval": row["interval"]["text"],
            }
        )
    return out


# The critical-difference diagram's drawing box (SVG user units; the SVG
# scales to the page's width, so 390 px phones get it whole).
CD_WIDTH = 400
CD_AXIS = (130, 270)  # x of rank 1 and of rank k
CD_TOP = 46  # y of the axis
CD_ROW = 20  # height of one setting's row


def cd_diagram(ranking: dict) -> dict | None:
    """A critical-difference diagram (Demšar 2006) of ``population.
    rank_settings``'s answer, as coordinates for an inline SVG: the rank
    axis (1 = best, left), each setting's mark and its label (the better
    half left, the rest right), the CD scale, and one bar per group of
    settings that cannot be told apart; each setting, best first, with
    the settings Nemenyi's test tells it apart from.  None without a
    ranking."""
    ranks = ranking.get("average_ranks")
    if not ranks:
        return None
    k = len(ranks)
    left, right = CD_AXIS

    def x(rank: float) -> float:
        return round(left + (rank - 1) * (right - left) / max(1, k - 1), 1)

    order = sorted(ranks, key=lambda name: (ranks[name], name))
    half = (k + 1) // 2
    groups = ranking.get("groups") or []
    first_row = CD_TOP + 14 + CD_ROW * len(groups)
    settings = []
    for i, name in enumerate(order):
        on_left = i < half
        row = i if on_left else k - 1 - i
        y = first_row + CD_ROW * row
        apart = [
            p["b"] if p["a"] == name else p["a"]
            for p in ranking.get("pairs") or []
            if p["different"] and name in (p["a"], p["b"])
        ]
        settings.append(
            {
                "name": name,
                "rank": ranks[name],
                "apart": apart,
                "x": x(ranks[name]),
                "y": y,
                "end": left - 8 if on_left else right + 8,
                "text_x": left - 12 if on_left else right + 12,
                "anchor": "end" if on_left else "start",
            }
        )
    cd = ranking.get("critical_difference") or 0.0
    return {
        "width": CD_WIDTH,
        "height": first_row + CD_ROW * half,
        "axis_y": CD_TOP,
        "ticks": [{"rank": r, "x": x(r)} for r in range(1, k + 1)],
        "left": left,
        "right": right,
        "cd": {"x1": x(1), "x2": round(x(1) + cd * (right - left) / max(1, k - 1), 1)},
        "cd_value": cd,
        "bars": [
            {
                "x1": x(min(ranks[n] for n in g)) - 3,
                "x2": x(max(ranks[n] for n in g)) + 3,
                "y": CD_TOP + 10 + CD_ROW * 0.5 * j,
                "names": g,
            }
            for j, g in enumerate(groups)
        ],
        "settings": settings,
    }


def overhead_chart(workload: dict, answer: dict, by_storage: list[dict]) -> list:
    """The overhead report's chart (static/js/charts.js): guest ÷ host for
    the setup, then per storage setup, one bar each with its interval (none
    when too wide to mean anything: ``too_noisy``, the bar says so) and its
    figure printed on it; a guest faster than its host is marked."""
    rows = [{"label": "Your setup, all storage", **answer}] if answer["runs"] else []
    rows += [{**r, "label": r["label"]} for r in by_storage]
    if not rows:
        return []

    def noisy(r: dict) -> bool:
        return bool(r.get("too_noisy"))

    def mark(r: dict) -> str:
        if r.get("above_host"):
            return "† faster than bare metal: host cache or thin provisioning"
        return ""

    return [
        {
            "slug": "overhead",
            "bars": [
                {
                    "title": f"{workload['title']}: guest ÷ host",
                    "axis": "Guest ÷ host (1× = bare-metal speed)",
                    "unit": "×",
                    "categories": [r["label"] for r in rows],
                    "datasets": [
                        {
                            "label": "Guest ÷ host",
                            "values": [r["ratio"] for r in rows],
                            # No whisker where the interval is too wide to
                            # mean anything: the bar says "(noisy)" instead.
                            "low": [None if noisy(r) else r["low"] for r in rows],
                            "high": [None if noisy(r) else r["high"] for r in rows],
                            "texts": [f"{r['ratio']:.2f}×" for r in rows],
                            "noisy": [noisy(r) for r in rows],
                            "marks": [mark(r) for r in rows],
                            "unsafe": False,
                        }
                    ],
                }
            ],
        }
    ]
