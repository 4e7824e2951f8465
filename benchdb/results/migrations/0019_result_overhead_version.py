"""``results_result.overhead_version``: the version of the formula a stored
overhead was computed by (``overheads.OVERHEAD_VERSION``); another version's
is read as absent.  The overheads stored so far were computed by version 1.
The number is written here, not imported: a migration does what it did when
it was written."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("results", "0018_data_version_backstop"),
    ]

    operations = [
        migrations.AddField(
            model_name="result",
            name="overhead_version",
            field=models.PositiveSmallIntegerField(
                blank=True, editable=False, null=True
            ),
        ),
        migrations.RunSQL(
            "UPDATE results_result SET overhead_version = 1 "
            "WHERE overhead IS NOT NULL",
            migrations.RunSQL.noop,
        ),
    ]
