"""A hardware row changed outside ingest bumps the data version.

Runs and results bump the data version when they change (their write
functions, and migration 0018's backstop trigger for any other write).  The
hardware under a run, with its CPU and disk models, is shown on the pages
and decides populations (the disk type is part of a run's comparability
key), but an edit of it (the admin, psql) bumped nothing: stored answers
were served as current and kept pages (``web/kept.py``) given again with the
old hardware.  The same backstop trigger now fires on their updates and
deletes (ingest only inserts them, with the runs that bump anyway): the
answers stored before are served as not current until the refresh, and a
kept page is written again.
"""

from django.db import migrations

TABLES = ("results_hardware", "results_cpumodel", "results_diskmodel")

FORWARD = "\n".join(
    f"""
CREATE CONSTRAINT TRIGGER {table}_data_version
    AFTER UPDATE OR DELETE ON {table}
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION results_data_changed();
ALTER TABLE {table} ENABLE ALWAYS TRIGGER {table}_data_version;
"""
    for table in TABLES
)

REVERSE = "\n".join(
    f"DROP TRIGGER IF EXISTS {table}_data_version ON {table};" for table in TABLES
)


class Migration(migrations.Migration):
    dependencies = [("results", "0029_submission_json_text")]

    operations = [migrations.RunSQL(FORWARD, REVERSE)]
