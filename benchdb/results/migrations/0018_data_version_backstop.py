"""The data version's trigger becomes a plain bump, a backstop.

Writes through benchdb announce what they change themselves
(``results.refresh.announce``, called by the write functions: store,
moderate, claim, retag, edit, delete): they bump the data version and, when
a listed run may have left a population, mark the removal.  Migration
0010's trigger classified every row change in plpgsql instead; it is
replaced by a plain version bump, once per transaction at its commit, for
writes made outside benchdb's write functions (psql, bulk loads); after an
announced write it bumps once more, which costs nothing.  Such a write marks
no removal: the answers stored before it are served as not current (never
as current) until the refresh that beat queues within a minute
(``refresh.recover``).  The triggers themselves (deferred, ``ENABLE
ALWAYS``) are unchanged.
"""

from django.db import migrations

BACKSTOP = r"""
CREATE OR REPLACE FUNCTION results_data_changed() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    tx text := txid_current()::text;
    -- Once per statement: at COMMIT every deferred event of the transaction
    -- fires within one statement (one bump); with SET CONSTRAINTS ...
    -- IMMEDIATE (the test suite) each statement bumps.
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

# Back to migration 0010's classifier, as it was written there.
CLASSIFIER = r"""
CREATE OR REPLACE FUNCTION results_data_changed() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    tx text := txid_current()::text;
    stmt text := tx || '@' || statement_timestamp()::text;
    fresh text;
    removal boolean := false;
    kept text[] := ARRAY['updated', 'owner_id', 'owner_key_hash', 'baseline_id'];
BEGIN
    IF TG_TABLE_NAME = 'results_result' THEN
        removal := true;
    ELSIF TG_OP = 'INSERT' THEN
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
                removal := (to_jsonb(OLD) - kept) IS DISTINCT FROM (to_jsonb(NEW) - kept)
                    OR (OLD.baseline_id IS NOT NULL
                        AND OLD.baseline_id IS DISTINCT FROM NEW.baseline_id);
            END IF;
        END IF;
    END IF;
    IF current_setting('benchdb.version_tx', true) IS DISTINCT FROM stmt THEN
        PERFORM set_config('benchdb.version_tx', stmt, true);
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
"""


class Migration(migrations.Migration):
    dependencies = [("results", "0017_run_sweep_order")]

    operations = [migrations.RunSQL(BACKSTOP, CLASSIFIER)]
