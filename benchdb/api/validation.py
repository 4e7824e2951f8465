"""The server's check of an uploaded bundle: the agent's contract, plus who
may send what.

Every rule a bundle must meet is ``benchdb_agent.contract.check``, the same
function the agent runs before it writes or sends a bundle, so the two never
disagree.  The server adds only its own rule: published reference figures
(``source: published``) come from staff.  Each raw output is decoded and
parsed once, there; the upload keeps what was parsed with the submission
(``ingest.parsed_of``), and the ingest task stores those records.
"""

from __future__ import annotations

import re

from benchdb.lib.collector import paused_gc
from benchdb.results.models import read_json
from benchdb_agent import contract

# ASCII digits only: str.isdigit() also accepts "¹", which int() refuses.
DIGITS = re.compile(r"[0-9]{1,18}")

# The contract's limits, named here for the API's documentation and tests.
MAX_TESTS = contract.MAX_TESTS
MAX_REPEATS = contract.MAX_REPEATS
MAX_STRING = contract.MAX_STRING


def check_upload(doc, *, allow_published: bool = False) -> contract.Checked:
    """The contract's check of an upload: ``errors`` (``{"pointer",
    "message"}``, empty if fine) and each raw output's parsed records.

    ``allow_published``: the sender is staff.
    """
    with paused_gc():
        # The raw outputs' JSON read by orjson: the values json.loads gives.
        return contract.check(doc, allow_published=allow_published, loads=read_json)


def check_bundle(doc, *, allow_published: bool = False, parse=None) -> list[dict]:
    """``check_upload``'s errors.  (``parse`` is accepted for older callers;
    the contract always parses with the agent's parsers.)"""
    return check_upload(doc, allow_published=allow_published).errors


def check_tags(tags) -> list[dict]:
    """The contract's tag rules (``contract.check_tag``) for a run's edit."""
    return contract.check_tags(tags, pointer="")
