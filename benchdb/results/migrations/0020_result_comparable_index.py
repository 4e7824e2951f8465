"""An index for a comparison's memo key: some runs' comparable result ids.

``compare._result_ids`` asks ``WHERE comparable AND run_id = ANY(...) ORDER
BY id`` on every comparison, a memo hit or not.  The (run_id) index does not
hold ``comparable``, so every result's heap page was read: on a new
comparison those pages are cold, and the key query was 52% of its time at a
million results.  A partial index on (run_id, id) of the comparable results
answers it from the index alone.
"""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("results", "0019_result_overhead_version"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="result",
            index=models.Index(
                condition=models.Q(("comparable", True)),
                fields=["run", "id"],
                name="results_result_comparable_idx",
            ),
        ),
    ]
