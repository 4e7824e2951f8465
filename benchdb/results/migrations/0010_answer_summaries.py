"""Stored across-runs answers and the data version they are checked against.

``results_dataversion`` holds one row, bumped by a trigger at the commit of
every transaction that writes runs (or changes or deletes results): one
primary-key read tells a web process whether a stored answer may be served
(``results.answer_cache``).  The trigger is a deferred constraint trigger,
so the version row is locked only for the moment of the commit, not for the
whole of an ingest; ``ENABLE ALWAYS`` keeps it firing under
``session_replication_role = replica`` (bulk loads, bench/data.py).
"""

from django.db import migrations, models


SQL = r"""
INSERT INTO results_dataversion (id, version, removed, changed)
VALUES (1, 1, 1, clock_timestamp()) ON CONFLICT (id) DO NOTHING;

CREATE OR REPLACE FUNCTION results_data_changed() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    tx text := txid_current()::text;
    -- Once per statement: at COMMIT every deferred event of the transaction
    -- fires within one statement (one bump); with SET CONSTRAINTS ...
    -- IMMEDIATE (the test suite) each statement bumps.
    stmt text := tx || '@' || statement_timestamp()::text;
    fresh text;
    removal boolean := false;
    kept text[] := ARRAY['updated', 'owner_id', 'owner_key_hash', 'baseline_id'];
BEGIN
    IF TG_TABLE_NAME = 'results_result' THEN
        -- Results change or go away only with maintenance or their run's
        -- deletion: count it as taking something out.
        removal := true;
    ELSIF TG_OP = 'INSERT' THEN
        -- A run inserted by this transaction was in no stored answer, so
        -- updating it later in the same transaction (ingest's suspect flag
        -- and baseline link) takes nothing out.  Ids are remembered up to
        -- a few thousand; past that an update counts as a removal.
        fresh := current_setting('benchdb.fresh_runs', true);
        IF fresh IS NULL OR split_part(fresh, ':', 1) <> tx THEN
            fresh := tx || ':,';
        END IF;
        IF length(fresh) < 20000 THEN
            PERFORM set_config('benchdb.fresh_runs', fresh || NEW.id || ',', true);
        END IF;
    ELSIF OLD.visibility = 'public' AND NOT OLD.hidden THEN
        IF TG_OP = 'DELETE' OR NEW.visibility <> 'public' OR NEW.hidden THEN
            removal := true;
        ELSE
            fresh := current_setting('benchdb.fresh_runs', true);
            IF fresh IS NULL OR split_part(fresh, ':', 1) <> tx
               OR position(',' || OLD.id || ',' IN fresh) = 0 THEN
                -- Any change but the owner, the time and a first baseline
                -- link can move the run between answers' filters.
                removal := (to_jsonb(OLD) - kept) IS DISTINCT FROM (to_jsonb(NEW) - kept)
                    OR (OLD.baseline_id IS NOT NULL
                        AND OLD.baseline_id IS DISTINCT FROM NEW.baseline_id);
            END IF;
        END IF;
    END IF;
    IF current_setting('benchdb.version_tx', true) IS DISTINCT FROM stmt THEN
        PERFORM set_config('benchdb.version_tx', stmt, true);
        -- An upsert: a flushed table (manage.py flush, the tests) starts over.
        INSERT INTO results_dataversion (id, version, removed, changed)
        VALUES (1, 1, 0, clock_timestamp())
        ON CONFLICT (id) DO UPDATE SET version = results_dataversion.version + 1,
            changed = EXCLUDED.changed;
    END IF;
    IF removal AND current_setting('benchdb.removed_tx', true) IS DISTINCT FROM stmt THEN
        PERFORM set_config('benchdb.removed_tx', stmt, true);
        UPDATE results_dataversion SET removed = version WHERE id = 1;
    END IF;
    RETURN NULL;
END;
$$;

CREATE CONSTRAINT TRIGGER results_run_data_version
    AFTER INSERT OR UPDATE OR DELETE ON results_run
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION results_data_changed();
ALTER TABLE results_run ENABLE ALWAYS TRIGGER results_run_data_version;

CREATE CONSTRAINT TRIGGER results_result_data_version
    AFTER UPDATE OR DELETE ON results_result
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION results_data_changed();
ALTER TABLE results_result ENABLE ALWAYS TRIGGER results_result_data_version;
"""

REVERSE = r"""
DROP TRIGGER IF EXISTS results_run_data_version ON results_run;
DROP TRIGGER IF EXISTS results_result_data_version ON results_result;
DROP FUNCTION IF EXISTS results_data_changed();
"""


class Migration(migrations.Migration):
    dependencies = [
        ("results", "0009_submission_parsed"),
    ]

    operations = [
        migrations.CreateModel(
            name="DataVersion",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True,
                        primary_key=True,
                        serialize=False,
                        verbose_name="ID",
                    ),
                ),
                ("version", models.BigIntegerField(default=0)),
                ("removed", models.BigIntegerField(default=0)),
                ("changed", models.DateTimeField(null=True)),
                ("refresh_queued", models.DateTimeField(null=True)),
            ],
            options={
                "db_table": "results_dataversion",
            },
        ),
        migrations.CreateModel(
            name="AnswerSummary",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True,
                        primary_key=True,
                        serialize=False,
                        verbose_name="ID",
                    ),
                ),
                ("name", models.CharField(max_length=100)),
                ("digest", models.CharField(max_length=64)),
                ("args", models.TextField()),
                ("answer", models.TextField()),
                ("version", models.BigIntegerField()),
                ("computed", models.DateTimeField()),
                ("runs", models.IntegerField()),
                ("seconds", models.FloatField(default=0)),
                ("requested", models.DateTimeField()),
            ],
            options={
                "db_table": "results_answersummary",
                "constraints": [
                    models.UniqueConstraint(
                        fields=("name", "digest"), name="results_answersummary_unique"
                    )
                ],
            },
        ),
        migrations.RunSQL(SQL, REVERSE),
    ]
