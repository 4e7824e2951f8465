"""An index of the listed runs that may stand for bare metal (listed, not
``virtual_host``): the overhead report's paired guests
(``reads.overhead_guests``: ``baseline_id IN (SELECT id ... WHERE NOT
hidden AND visibility = 'public' AND NOT virtual_host)``) found their
baselines by a sequential scan of the runs on every request, for its
bounded count: 8,000-9,300 of its 9,360 buffers read at a million
results; with it, 817 buffers, all hits.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("results", "0026_run_left_out_index_covering"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="run",
            index=models.Index(
                condition=models.Q(
                    ("hidden", False), ("virtual_host", False), ("visibility", "public")
                ),
                fields=["id"],
                name="results_run_listed_bare_idx",
            ),
        ),
    ]
