"""Recompute every stored summary with log-scale intervals.

Summaries stored before statistics moved to SciPy carried Student-t intervals
on the raw values.  This migration recomputed them with the statistics code
of its time.  A migration must not import today's code (a change to
``results.stats`` would silently change what an old migration does), so it
now does nothing where there is nothing to recompute, which is every
database created since (the results table is empty at this point of a fresh
migrate).  A database still holding results from before it must be
migrated by the release that introduced it first: it stops with the command.
"""

from django.db import migrations

# The commit that introduced this migration (and the code it ran with).
RELEASE = "9b88618"


def recompute(apps, schema_editor):
    Result = apps.get_model("results", "Result")
    if Result.objects.exists():
        raise RuntimeError(
            "This database holds results from before migration results.0003 "
            "(log-scale intervals). Migrate it with the benchdb release that "
            f"introduced it first: git checkout {RELEASE} && python manage.py "
            "migrate results 0003; then check out this version and migrate again."
        )


class Migration(migrations.Migration):
    dependencies = [("results", "0002_run_sweep")]

    operations = [migrations.RunPython(recompute, migrations.RunPython.noop)]
