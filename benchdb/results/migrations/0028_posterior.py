"""The posteriors of the Bayesian signed-rank test, kept by their inputs.

``across.bayes_signed_ranks`` draws 50,000 Dirichlet vectors per answer, most
of what the reports' cache-mode answers cost (seconds at a thousand
systems), and gives the same probabilities for the same differences: the
refresh after an upload computes those answers again with their paired
systems unchanged.  One row per input (``key``: a hash of the differences,
the region of equivalence, the prior, the draws and the seed), written by
whoever computes it first, dropped by the refresh once unused for a while.
"""

from django.db import migrations

SQL = """
CREATE TABLE results_posterior (
    key text PRIMARY KEY,
    probs double precision[] NOT NULL,
    used timestamptz NOT NULL DEFAULT now()
)
"""


class Migration(migrations.Migration):
    dependencies = [("results", "0027_run_listed_bare_index")]

    operations = [
        migrations.RunSQL(SQL, "DROP TABLE results_posterior"),
    ]
