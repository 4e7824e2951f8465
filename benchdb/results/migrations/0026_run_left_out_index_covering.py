"""The left-out runs' index (0024) holds what ``reports.left_out`` reads of
them (id, visibility, suspect, source): an index-only scan, where at a
million results the counts read 848 runs' heap pages (886 runs) for one
cache-mode report.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("results", "0025_result_key_figure_indexes"),
    ]

    operations = [
        migrations.RemoveIndex(
            model_name="run",
            name="results_run_left_out_idx",
        ),
        migrations.AddIndex(
            model_name="run",
            index=models.Index(
                condition=models.Q(
                    ("hidden", False),
                    models.Q(("visibility", "private"), _negated=True),
                    models.Q(
                        ("suspect", True),
                        ("visibility", "unlisted"),
                        ("source", "imported"),
                        _connector="OR",
                    ),
                ),
                fields=["role", "cache_mode"],
                include=("id", "visibility", "suspect", "source"),
                name="results_run_left_out_idx",
            ),
        ),
    ]
