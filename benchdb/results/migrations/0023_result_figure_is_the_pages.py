"""A result's figure columns hold the run's figure as its pages show it.

``iops_mean``, ``bw_bytes_mean`` and ``lat_mean_ns_mean`` were the
arithmetic mean of the repeats while the run and compare pages showed the
geometric mean: a list said 22,854 IOPS where the run page said 22,808, and
the cache-mode report -4.68% where the compare page said -4.93%.  Ingest now
writes ``stats.centre`` of the main direction's summary (the geometric mean,
the arithmetic one where a repeat measured zero and there is no geometric
mean); this recomputes the stored rows from the same summaries in ``stats``,
written out in SQL here (a migration never imports benchdb code).  Only rows
whose figure changes are written; backwards, the arithmetic means again.
"""

from django.db import migrations, models

# {figure}: the summary key read first, {fallback} where it is null.
RECOMPUTE = """
WITH main AS (
    SELECT id, stats -> 'directions' -> (stats ->> 'main_direction') AS d
    FROM results_result
), figure AS (
    SELECT id,
        COALESCE(d #>> '{{iops,{figure}}}', d #>> '{{iops,{fallback}}}')
            ::double precision AS iops,
        COALESCE(d #>> '{{bw_bytes,{figure}}}', d #>> '{{bw_bytes,{fallback}}}')
            ::double precision AS bw,
        COALESCE(d #>> '{{lat_mean_ns,{figure}}}', d #>> '{{lat_mean_ns,{fallback}}}')
            ::double precision AS lat
    FROM main
)
UPDATE results_result r
SET iops_mean = f.iops, bw_bytes_mean = f.bw, lat_mean_ns_mean = f.lat
FROM figure f
WHERE r.id = f.id
  AND (r.iops_mean IS DISTINCT FROM f.iops
       OR r.bw_bytes_mean IS DISTINCT FROM f.bw
       OR r.lat_mean_ns_mean IS DISTINCT FROM f.lat);
"""

FIGURE = (
    "The run's figure (%s) in the main direction, as its pages show it: the "
    "geometric mean of the repeats (the arithmetic mean where a repeat "
    "measured zero)."
)


class Migration(migrations.Migration):
    dependencies = [
        ("results", "0022_changed_run"),
    ]

    operations = [
        migrations.AlterField(
            model_name="result",
            name="iops_mean",
            field=models.FloatField(blank=True, help_text=FIGURE % "IOPS", null=True),
        ),
        migrations.AlterField(
            model_name="result",
            name="bw_bytes_mean",
            field=models.FloatField(
                blank=True, help_text=FIGURE % "bandwidth, bytes/s", null=True
            ),
        ),
        migrations.AlterField(
            model_name="result",
            name="lat_mean_ns_mean",
            field=models.FloatField(
                blank=True, help_text=FIGURE % "mean latency, ns", null=True
            ),
        ),
        migrations.RunSQL(
            RECOMPUTE.format(figure="gmean", fallback="mean"),
            reverse_sql=RECOMPUTE.format(figure="mean", fallback="mean"),
        ),
    ]
