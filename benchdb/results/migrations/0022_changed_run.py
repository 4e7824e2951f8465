"""The removal log becomes the change log (``results_changedrun``): every
run a write function changed (``refresh.announce``), with ``removal`` for
those it took out of a population (all of the rows logged so far).

The data version's backstop trigger (migration 0018) also logs a change
that names no run when the transaction it bumps for announced nothing (a
write outside benchdb's write functions: psql, bulk loads): the refresh
then cannot tell which answers it reached, and recomputes every stale one.
``announce`` marks its transaction (``benchdb.announced``).
"""

from django.db import migrations, models

LOGGING = r"""
CREATE OR REPLACE FUNCTION results_data_changed() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    tx text := txid_current()::text;
    -- Once per statement: at COMMIT every deferred event of the transaction
    -- fires within one statement (one bump); with SET CONSTRAINTS ...
    -- IMMEDIATE (the test suite) each statement bumps.
    stmt text := tx || '@' || statement_timestamp()::text;
    bumped bigint;
BEGIN
    IF current_setting('benchdb.version_tx', true) IS DISTINCT FROM stmt THEN
        PERFORM set_config('benchdb.version_tx', stmt, true);
        INSERT INTO results_dataversion (id, version, removed, changed)
        VALUES (1, 1, 0, clock_timestamp())
        ON CONFLICT (id) DO UPDATE SET version = results_dataversion.version + 1,
            changed = EXCLUDED.changed
        RETURNING version INTO bumped;
        IF current_setting('benchdb.announced', true) IS DISTINCT FROM tx THEN
            INSERT INTO results_changedrun (version, run_id, removal, at)
            VALUES (bumped, NULL, false, clock_timestamp());
        END IF;
    END IF;
    RETURN NULL;
END;
$$;
"""

# Migration 0018's, as it was written there.
BACKSTOP = r"""
CREATE OR REPLACE FUNCTION results_data_changed() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    tx text := txid_current()::text;
    stmt text := tx || '@' || statement_timestamp()::text;
BEGIN
    IF current_setting('benchdb.version_tx', true) IS DISTINCT FROM stmt THEN
        PERFORM set_config('benchdb.version_tx', stmt, true);
        INSERT INTO results_dataversion (id, version, removed, changed)
        VALUES (1, 1, 0, clock_timestamp())
        ON CONFLICT (id) DO UPDATE SET version = results_dataversion.version + 1,
            changed = EXCLUDED.changed;
    END IF;
    RETURN NULL;
END;
$$;
"""


class Migration(migrations.Migration):
    dependencies = [
        ("results", "0021_removed_run"),
    ]

    operations = [
        migrations.RenameModel(old_name="RemovedRun", new_name="ChangedRun"),
        migrations.AlterModelTable(name="changedrun", table="results_changedrun"),
        migrations.AddField(
            model_name="changedrun",
            name="removal",
            field=models.BooleanField(default=True),
        ),
        migrations.RunSQL(LOGGING, BACKSTOP),
    ]
