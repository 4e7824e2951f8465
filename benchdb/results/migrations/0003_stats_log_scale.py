"""Recompute every stored summary with results.stats (log-scale intervals).

Summaries stored before statistics moved to SciPy carry Student-t intervals on
the raw values, which can go below zero, and intervals built on two repeats.
The means are unchanged (arithmetic means of the same repeats); ``ci95_low``,
``ci95_high`` become the geometric mean's log-scale interval (3+ repeats only),
and ``gmean`` and ``note`` are added; latency percentiles lose their mean
and keep each repeat's value and the range.  Done in chunks, one measurements query
per chunk.
"""

from collections import defaultdict

from django.db import migrations

CHUNK = 500


def recompute(apps, schema_editor):
    from benchdb.results.compare import aggregate_repeat
    from benchdb.results.models import METRIC_FIELDS
    from benchdb.results.stats import summarize_metric

    Result = apps.get_model("results", "Result")
    Measurement = apps.get_model("results", "Measurement")
    ids = list(Result.objects.order_by("pk").values_list("pk", flat=True))
    for start in range(0, len(ids), CHUNK):
        chunk = ids[start : start + CHUNK]
        repeats = defaultdict(lambda: defaultdict(list))
        rows = (
            Measurement.objects.filter(result_id__in=chunk)
            .order_by("result_id", "repeat", "direction", "job")
            .values("result_id", "repeat", "direction", "job", *METRIC_FIELDS)
        )
        for row in rows:
            repeats[row["result_id"]][row["repeat"]].append(row)
        changed = []
        for res in Result.objects.filter(pk__in=chunk):
            per_dir = defaultdict(lambda: defaultdict(list))
            for repeat in sorted(repeats.get(res.pk, {})):
                for direction, metrics in aggregate_repeat(
                    repeats[res.pk][repeat]
                ).items():
                    for f, v in metrics.items():
                        if v is not None:
                            per_dir[direction][f].append(v)
            stats = dict(res.stats or {})
            stats["directions"] = {
                d: {f: summarize_metric(f, vals) for f, vals in m.items()}
                for d, m in per_dir.items()
            }
            res.stats = stats
            changed.append(res)
        Result.objects.bulk_update(changed, ["stats"])


class Migration(migrations.Migration):
    dependencies = [("results", "0002_run_sweep")]

    operations = [migrations.RunPython(recompute, migrations.RunPython.noop)]
