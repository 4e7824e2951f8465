"""An index of the runs a report's answer leaves out: suspect, unlisted or
imported (``reports.left_out``, ``reports.LEFT_OUT``).

The cache-mode report counts them per cache mode on every request, for the
chosen setup and workload: ``WHERE NOT hidden AND NOT visibility = 'private'
AND (suspect OR visibility = 'unlisted' OR source = 'imported') AND role =
'guest' ... GROUP BY cache_mode``.  Without the condition it read every
guest run of the setup and its result of that test (a sequential scan of
the runs, growing with the table); with it and this partial index it reads
those few percent of the runs.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("results", "0023_result_figure_is_the_pages"),
    ]

    operations = [
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
                name="results_run_left_out_idx",
            ),
        ),
    ]
