"""The ``main_values`` trigger (migration 0013) fires on an update only when
it sets ``stats`` or ``main_values``: an update of another column (the
stored ``overhead`` ingest writes when it links a pair, migration 0014)
leaves ``main_values`` as it is, which it would have cut again to the same
value, 2 of the 9 ms ``overheads.store_overheads`` took per guest run.  Every
insert still cuts it, and so does every update that names ``stats``
(Django's ``save()`` names every column), or ``main_values`` (a writer of
the column itself is still overruled): tests/api/test_main_values.py."""

from django.db import migrations

TRIGGER = """
DROP TRIGGER IF EXISTS results_result_main_values ON results_result;
CREATE TRIGGER results_result_main_values
    BEFORE INSERT OR UPDATE {columns}ON results_result
    FOR EACH ROW EXECUTE FUNCTION results_result_main_values();
ALTER TABLE results_result ENABLE ALWAYS TRIGGER results_result_main_values;
"""


class Migration(migrations.Migration):
    dependencies = [
        ("results", "0014_result_overhead"),
    ]

    operations = [
        migrations.RunSQL(
            TRIGGER.format(columns="OF stats, main_values "),
            reverse_sql=TRIGGER.format(columns=""),
        ),
    ]
