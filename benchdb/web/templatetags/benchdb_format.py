"""Number formatting for the pages: the stored units, shown readably.

Values are stored in bytes/s, ns and IOPS; the pages show MB/s (10^6 bytes),
µs or ms, and IOPS with three significant figures, and always say which.

``METRICS`` is the one place that turns the agent's metric keys
(``parsers.common.METRIC_KEYS``: ``bw_bytes``, ``clat_p99_ns``…) into words,
the unit shown and whether more is better; templates use ``metric_name``,
charts ``metric_axis``.
"""

from __future__ import annotations

from django import template

from benchdb.results import stats
from benchdb_agent import stats as agent_stats
from benchdb_agent import vocab as agent_vocab

register = template.Library()

# key -> (words, unit shown, divisor from the stored unit, higher is better)
METRICS = {
    "iops": ("Operations per second", "IOPS", 1.0, True),
    "bw_bytes": ("Bandwidth", "MB/s", 1e6, True),
    "io_bytes": ("Data transferred", "MiB", 2**20, None),
    "runtime_s": ("Time taken", "s", 1.0, False),
    "lat_mean_ns": ("Mean latency", "µs", 1e3, False),
    "clat_mean_ns": ("Mean completion latency", "µs", 1e3, False),
    "clat_p50_ns": ("Median completion latency", "µs", 1e3, False),
    "clat_p99_ns": ("99th percentile completion latency", "µs", 1e3, False),
    "clat_p99_9_ns": ("99.9th percentile completion latency", "µs", 1e3, False),
    "lat_min_ns": ("Lowest latency", "µs", 1e3, False),
    "lat_max_ns": ("Highest latency", "µs", 1e3, False),
    "lat_stdev_ns": ("Latency standard deviation", "µs", 1e3, None),
}


def metric_words(key: str | None) -> str:
    """ "Mean latency" for lat_mean_ns; the key itself if it is not known."""
    if not key:
        return "—"
    return METRICS.get(key, (key,))[0]


def metric_unit(key: str | None) -> str:
    return METRICS[key][1] if key in METRICS else ""


def metric_scale(key: str | None) -> float:
    """Divisor from the stored unit to the shown one."""
    return METRICS[key][2] if key in METRICS else 1.0


def metric_axis(key: str | None) -> str:
    """Axis title: words, unit and which way is better."""
    if key not in METRICS:
        return key or ""
    words, unit, _scale, better = METRICS[key]
    way = {True: ", higher is better", False: ", lower is better"}.get(better, "")
    return f"{words}, {unit}{way}"


def human(value, metric: str) -> str:
    """A figure with its unit, as the agent's end-of-run table writes it
    (``benchdb_agent.stats.human``: one definition), with µs and an em dash."""
    return agent_stats.human(value, metric, micro="µs", missing="—")


def loses_data(cache_mode: str | None) -> bool:
    """Whether a host cache mode can lose data the guest flushed on a host
    power failure (``vocab.CACHE_MODE_SAFETY``: cache=unsafe ignores the
    guest's flushes).  Such a run is never shown as a plain "better": it is
    faster because it does not keep what it was asked to keep."""
    return agent_vocab.CACHE_MODE_SAFETY.get(cache_mode or "", ("",))[0] == "unsafe"


def too_noisy(summary: dict | None) -> bool:
    """Whether a figure's 95% interval is too wide to mean anything
    (``stats.too_wide``: the one rule)."""
    if not summary:
        return False
    return stats.too_wide(summary.get("ci95_low"), summary.get("ci95_high"))


def interval_text(summary: dict | None, metric: str) -> str:
    """A figure's 95% interval as every page and export prints it: "low –
    high"; "too noisy to estimate (n repeats)" when it is too wide to mean
    anything; min–max, said so, without an interval; "—" without figures."""
    summary = summary or {}
    low, high = summary.get("ci95_low"), summary.get("ci95_high")
    if low is not None and high is not None:
        if stats.too_wide(low, high):
            return stats.too_noisy_text(summary.get("n"))
        return f"{human(low, metric)} – {human(high, metric)}"
    if summary.get("min") is not None:
        lo, hi = human(summary["min"], metric), human(summary.get("max"), metric)
        return f"{lo} – {hi} (min–max)"
    return "—"


@register.filter
def metric(value, name: str) -> str:
    return human(value, name)


@register.filter(name="interval")
def interval_filter(summary, metric_key: str) -> str:
    """``{{ entry|interval:"iops" }}``: ``interval_text``."""
    return interval_text(summary, metric_key)


def _answer_interval(
    answer, low_key: str, high_key: str, wide, count_key: str, unit: str, show
) -> str:
    """An answer's 95% interval, ``answer[low_key]`` to ``answer[high_key]``
    written by ``show(low, high)``; "too noisy to estimate (n units)" when
    ``wide(low, high)`` (``stats.too_wide`` or its percent form), n being
    ``answer[count_key]``; "—" without one."""
    answer = answer or {}
    low, high = answer.get(low_key), answer.get(high_key)
    if low is None or high is None:
        return "—"
    if wide(low, high):
        return stats.too_noisy_text(answer.get(count_key), unit)
    return show(low, high)


@register.filter
def percent_interval(answer) -> str:
    """An answer's 95% interval of a change, ``low_percent`` … ``high_percent``
    ("−4.1% … +2.0%"); "too noisy to estimate (n systems)" when it is too
    wide to mean anything (``stats.too_wide_percent``); "—" without one."""
    return _answer_interval(
        answer,
        "low_percent",
        "high_percent",
        stats.too_wide_percent,
        "systems",
        "system",
        lambda low, high: f"{pct(low)} … {pct(high)}",
    )


@register.filter(name="too_noisy")
def too_noisy_filter(summary) -> bool:
    """``{% if entry|too_noisy %}``: ``too_noisy``."""
    return too_noisy(summary)


@register.filter
def rounds_interval(answer) -> str:
    """A sweep's ratio paired by round (``across.paired_by_round``): its 95%
    interval as "0.912–1.034×"; "too noisy to estimate (n rounds)" when it
    is too wide to mean anything (``stats.too_wide``); "—" without one."""
    return _answer_interval(
        answer,
        "low",
        "high",
        stats.too_wide,
        "rounds",
        "round",
        lambda low, high: f"{low:.3f}–{high:.3f}×",
    )


@register.filter(name="too_noisy_text")
def too_noisy_text_filter(n, unit: str = "repeat") -> str:
    """``{{ n|too_noisy_text:"pair" }}``: what a too-wide interval shows
    instead of its bounds, "too noisy to estimate (4 pairs)"."""
    return stats.too_noisy_text(n, unit)


@register.filter
def metric_name(key) -> str:
    return metric_words(key)


@register.filter
def pct(value) -> str:
    if value is None:
        return "—"
    return f"{value:+.1f}%"


@register.filter
def pvalue(value) -> str:
    """A p-value as every page prints it (``stats.format_p``)."""
    return stats.format_p(value)


@register.filter
def get(mapping, key):
    if mapping is None:
        return None
    return mapping.get(key)


@register.filter
def get_metric(measurement, name: str) -> str:
    """A measurement's value of a metric, formatted."""
    if not name:
        return "—"
    return human(getattr(measurement, name, None), name)


@register.simple_tag(takes_context=True)
def sort_link(context, field: str) -> str:
    """The query string that sorts by ``field``: ascending first, then the
    other way when it is already the sort; other parameters kept, the page
    and the old ordering replaced (never appended)."""
    request = context["request"]
    query = request.GET.copy()
    current = query.get("ordering", "")
    query.pop("page", None)
    query["ordering"] = f"-{field}" if current == field else field
    return "?" + query.urlencode()


@register.simple_tag(takes_context=True)
def sort_state(context, field: str) -> str:
    """ "ascending", "descending" or "none", for aria-sort and the arrow."""
    current = context["request"].GET.get("ordering", "")
    if current == field:
        return "ascending"
    if current == f"-{field}":
        return "descending"
    return "none"


@register.simple_tag(takes_context=True)
def without(context, name: str, value: str = "") -> str:
    """The current query string with one filter value removed (a chip's ×)."""
    query = context["request"].GET.copy()
    query.pop("page", None)
    values = [v for v in query.getlist(name) if value and v != value]
    if values:
        query.setlist(name, values)
    else:
        query.pop(name, None)
    return "?" + query.urlencode()


@register.filter
def thousands(value) -> str:
    """A count with thousands separated: 10,000."""
    return f"{int(value):,}" if value is not None else ""
