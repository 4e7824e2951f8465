"""benchdb-agent: the standard VM disk benchmark suite, run honestly."""

__version__ = "0.1.0"
