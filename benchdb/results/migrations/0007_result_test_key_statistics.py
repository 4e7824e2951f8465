"""Extended statistics: a comparability key determines its test id.

Without them PostgreSQL multiplies the selectivities of ``test_id = ...``
and ``comparability_key = ...`` as if independent and expects a few hundred
rows where a million results hold tens of thousands; it then reads every
result row's heap page (bitmap scans) for the across-runs answers
(``results.population``). With them the reports' population queries at 1M
results took half the time (bench/README.md).
"""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("results", "0006_run_listed_index")]

    operations = [
        migrations.RunSQL(
            "CREATE STATISTICS IF NOT EXISTS results_result_test_key_stats "
            "(dependencies) ON test_id, comparability_key FROM results_result; "
            "ANALYZE results_result;",
            "DROP STATISTICS IF EXISTS results_result_test_key_stats;",
        )
    ]
