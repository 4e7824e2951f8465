"""Number formatting for the pages: the stored units, shown readably.

Values are stored in bytes/s, ns and IOPS; the pages show MB/s (10^6 bytes),
µs or ms, and IOPS with three significant figures, and always say which.
"""

from __future__ import annotations

from django import template

register = template.Library()


def human(value, metric: str) -> str:
    if value is None:
        return "—"
    if metric in ("bw_bytes",):
        return f"{value / 1e6:,.1f} MB/s"
    if metric in ("io_bytes",):
        return f"{value / 2**20:,.1f} MiB"
    if metric.endswith("_ns"):
        if value >= 1e6:
            return f"{value / 1e6:,.2f} ms"
        return f"{value / 1e3:,.1f} µs"
    if metric == "runtime_s":
        return f"{value:,.3f} s"
    if metric == "iops":
        return f"{value:,.0f} IOPS"
    return f"{value:,.4g}"


@register.filter
def metric(value, name: str) -> str:
    return human(value, name)


@register.filter
def pct(value) -> str:
    if value is None:
        return "—"
    return f"{value:+.1f}%"


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
