"""benchdb-agent: the standard VM disk benchmark suite, run honestly."""

__version__ = "0.1.0"

# Where `vm --cache-modes` keeps a VM's original configuration until it is
# restored (cli's help names it without importing vm).
DEFAULT_STATE_DIR = "/var/lib/benchdb-agent"
# Rounds of a `vm --cache-modes` sweep: every mode once per round, each
# round in a fresh random order (cli's default, without importing vm).
SWEEP_ROUNDS = 3
