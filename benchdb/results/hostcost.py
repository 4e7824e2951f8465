"""What a guest run's I/O cost the host's CPU (``benchdb-agent vm``).

While a guest run lasts, ``vm`` reads the QEMU process's CPU time on the host
(user and system, per thread name with iothreads named, context switches)
and the host's CPU utilisation, and sends them in the guest bundle's
``environment.host_cpu`` (agent/benchdb_agent/vm.py, ``HostCpuSampler``).
Here they become host CPU microseconds per I/O and per MB (10^6 bytes) of the
run's I/O: the QEMU process's user + system time over the I/Os and bytes of
every repeat of every test (an I/O count is a record's IOPS times its
runtime, fio's own definition of IOPS; bytes are the records' ``io_bytes``).
The time covers the whole guest run, the agent's work between tests
included, so the figures are an upper bound of the I/O's own cost.
"""

from __future__ import annotations

import statistics

from django.db.models import F, Sum

from benchdb.results.models import Measurement, Run

NOT_MEASURED = (
    "the host's CPU time was not measured for this run (only `benchdb-agent vm` "
    "measures it, on the host, while the guest runs)"
)


def host_cost(host_cpu: dict | None, ios: float | None, io_bytes: float | None) -> dict:
    """CPU per I/O and per MB from ``environment.host_cpu`` and the run's I/O.

    ``{"measured", "cpu_s", "user_s", "system_s", "us_per_io", "us_per_mb",
    "iothreads", "context_switches", "host_utilisation", "seconds", "text"}``;
    ``measured`` False (and the text saying so) without ``host_cpu``.
    """
    if not host_cpu:
        return {"measured": False, "text": NOT_MEASURED}
    cpu = float(host_cpu.get("user_s", 0)) + float(host_cpu.get("system_s", 0))
    out = {
        "measured": True,
        "cpu_s": cpu,
        "user_s": host_cpu.get("user_s"),
        "system_s": host_cpu.get("system_s"),
        "seconds": host_cpu.get("seconds"),
        "iothreads": [
            t for t in host_cpu.get("threads") or [] if t.get("kind") == "iothread"
        ],
        "context_switches": (host_cpu.get("voluntary_ctxt_switches") or 0)
        + (host_cpu.get("nonvoluntary_ctxt_switches") or 0),
        "host_utilisation": host_cpu.get("host_utilisation"),
        "us_per_io": cpu * 1e6 / ios if ios else None,
        "us_per_mb": cpu * 1e6 / (io_bytes / 1e6) if io_bytes else None,
    }
    out["text"] = (
        f"QEMU used {cpu:.2f} s of host CPU over the guest run"
        + (f": {out['us_per_io']:.1f} µs per I/O" if out["us_per_io"] else "")
        + (f", {out['us_per_mb']:.0f} µs per MB" if out["us_per_mb"] else "")
    )
    return out


def run_host_cost(run: Run) -> dict:
    """``host_cost`` of a run: its ``environment.host_cpu`` and one aggregate
    over its measurements (I/Os and bytes)."""
    host_cpu = (run.environment or {}).get("host_cpu")
    if not host_cpu:
        return host_cost(None, None, None)
    io = Measurement.objects.filter(result__run=run).aggregate(
        ios=Sum(F("iops") * F("runtime_s")), io_bytes=Sum("io_bytes")
    )
    return host_cost(host_cpu, io["ios"], io["io_bytes"])


def runs_host_cost(runs) -> dict:
    """The median host CPU µs per I/O over those of ``runs`` that measured it.

    Two queries whatever the number of runs: the runs' QEMU CPU seconds
    (``environment.host_cpu``) and their I/O counts grouped by run.
    ``{"runs", "median_us_per_io", "min", "max"}``; ``runs`` 0 and the
    figures None when no run measured it.
    """
    cpu = {
        pk: (user or 0.0) + (system or 0.0)
        for pk, user, system in runs.filter(
            environment__has_key="host_cpu"
        ).values_list(
            "pk", "environment__host_cpu__user_s", "environment__host_cpu__system_s"
        )
    }
    io = (
        Measurement.objects.filter(result__run__in=list(cpu))
        .values("result__run")
        .annotate(ios=Sum(F("iops") * F("runtime_s")))
        .order_by()
    )
    per_io = sorted(
        cpu[row["result__run"]] * 1e6 / row["ios"]
        for row in io
        if row["ios"] and cpu[row["result__run"]] > 0
    )
    if not per_io:
        return {"runs": 0, "median_us_per_io": None, "min": None, "max": None}
    return {
        "runs": len(per_io),
        "median_us_per_io": float(statistics.median(per_io)),
        "min": per_io[0],
        "max": per_io[-1],
    }
