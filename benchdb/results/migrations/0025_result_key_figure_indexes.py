"""Indexes of one comparability key's results by figure (IOPS, bandwidth).

A run page offers, per headline test, the runs whose figure is nearest to
the run's (``standing.nearest_runs``): ``... WHERE comparability_key = %s AND
comparable AND iops_mean IS NOT NULL ... ORDER BY abs(iops_mean - %s) LIMIT
3``.  With only (comparability_key, run_id) indexed, PostgreSQL sorted every
result of the key by its distance (41,668 at a million results, 30-50 ms,
four times a page).  It now asks for the figures within the k-th nearest
one of the stored population (``standing._window``), a range of these
indexes.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("results", "0024_run_left_out_index"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="result",
            index=models.Index(
                condition=models.Q(("comparable", True), ("iops_mean__isnull", False)),
                fields=["comparability_key", "iops_mean"],
                include=("run",),
                name="results_result_key_iops_idx",
            ),
        ),
        migrations.AddIndex(
            model_name="result",
            index=models.Index(
                condition=models.Q(
                    ("bw_bytes_mean__isnull", False), ("comparable", True)
                ),
                fields=["comparability_key", "bw_bytes_mean"],
                include=("run",),
                name="results_result_key_bw_idx",
            ),
        ),
    ]
