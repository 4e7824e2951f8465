"""``python -m benchdb_agent`` and the zipapp's entry point."""

import sys

from benchdb_agent.cli import main

sys.exit(main())
