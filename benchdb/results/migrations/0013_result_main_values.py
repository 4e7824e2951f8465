"""What a comparison reads of a result, kept beside its statistics.

``results_result.main_values`` is ``[main direction, [the per-repeat values
in that direction of iops, bw_bytes, lat_mean_ns, clat_p99_ns] or null]``,
written from ``stats`` by a BEFORE trigger on every insert and update
(``ENABLE ALWAYS``: also under ``session_replication_role = replica``, the
bench's bulk copy).  A comparison read these paths out of each result's
whole ``stats`` JSON, which PostgreSQL decompresses per row: 3.2 of the 3.6
ms of the ten-run comparison's query at a million results.  The metric list
is ``metrics.MAIN_METRICS`` (tests/api/test_main_values.py holds the two
to each other).  Existing rows are filled in by one UPDATE, in the
migration's transaction: 1 min 36 s for a million results on the bench
machine (docs/deploy.md).
"""

from django.db import migrations, models

METRICS = ("iops", "bw_bytes", "lat_mean_ns", "clat_p99_ns")
VALUES = ", ".join(
    f"s #> ARRAY['values', s ->> 'main_direction', '{m}']" for m in METRICS
)
EXPRESSION = (
    "jsonb_build_array(s -> 'main_direction', "
    "CASE WHEN jsonb_typeof(s -> 'values') = 'object' "
    f"THEN jsonb_build_array({VALUES}) END)"
)

SQL = f"""
CREATE OR REPLACE FUNCTION results_result_main_values() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    s jsonb := NEW.stats;
BEGIN
    NEW.main_values := {EXPRESSION};
    RETURN NEW;
END $$;

CREATE TRIGGER results_result_main_values
    BEFORE INSERT OR UPDATE ON results_result
    FOR EACH ROW EXECUTE FUNCTION results_result_main_values();
ALTER TABLE results_result ENABLE ALWAYS TRIGGER results_result_main_values;

UPDATE results_result SET main_values = NULL;
"""

REVERSE = """
DROP TRIGGER IF EXISTS results_result_main_values ON results_result;
DROP FUNCTION IF EXISTS results_result_main_values();
"""


class Migration(migrations.Migration):
    dependencies = [
        ("results", "0012_run_listed_host_index"),
    ]

    operations = [
        migrations.AddField(
            model_name="result",
            name="main_values",
            field=models.JSONField(blank=True, editable=False, null=True),
        ),
        migrations.RunSQL(SQL, REVERSE),
    ]
