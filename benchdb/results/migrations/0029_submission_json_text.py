"""A submission's bundle and what the API parsed of it kept as JSON text
(``json``), not ``jsonb``: both are written once and read back whole by the
ingest task, never searched in SQL, and ``jsonb`` parsed each on the way in
and printed it again on the way out (``models.JSONTextField``; bench/README.md,
"Ingest at 50 bundles/s").  Migrations import no live code, so the state
keeps Django's JSONField and the type is changed here by SQL.  Existing rows
are converted in the migration's transaction (a rewrite of the submissions
table).  The columns keep lz4 (migration 0009) where PostgreSQL has it.
"""

from django.db import migrations


def _retype(kind: str) -> str:
    return (
        f"ALTER TABLE results_submission ALTER COLUMN bundle TYPE {kind} "
        f"USING bundle::{kind}, ALTER COLUMN parsed TYPE {kind} "
        f"USING parsed::{kind}; "
        "DO $$ BEGIN "
        "ALTER TABLE results_submission ALTER COLUMN bundle SET COMPRESSION lz4; "
        "ALTER TABLE results_submission ALTER COLUMN parsed SET COMPRESSION lz4; "
        "EXCEPTION WHEN feature_not_supported THEN NULL; END $$;"
    )


class Migration(migrations.Migration):
    dependencies = [
        ("results", "0028_posterior"),
    ]

    operations = [
        migrations.RunSQL(_retype("json"), _retype("jsonb")),
    ]
