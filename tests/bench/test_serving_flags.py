"""The harness's gunicorn serves as the deployment does: the flags it adds
(``bench.timing.DEPLOYED_FLAGS``) are those of docker/entrypoint.sh's web
line, which ``manage.py serve`` and compose run."""

from __future__ import annotations

import re
from pathlib import Path

from bench.timing import DEPLOYED_FLAGS

ROOT = Path(__file__).resolve().parents[2]


def _web_command() -> str:
    text = (ROOT / "docker" / "entrypoint.sh").read_text()
    start = text.index("exec python -m gunicorn benchdb.wsgi:application")
    return text[start : text.index('"$@"', start)]


def test_the_harness_serves_with_the_deployments_flags():
    command = _web_command()
    words = list(DEPLOYED_FLAGS)
    assert "--preload" in words and "--preload" in command.split()
    for flag in ("--max-requests", "--max-requests-jitter"):
        deployed = re.search(rf"{flag}\s+(\d+)\b", command)
        assert deployed is not None, flag
        assert words[words.index(flag) + 1] == deployed.group(1), flag
    # Nothing else: each flag the harness adds is one the deployment has.
    for word in words:
        if word.startswith("--"):
            assert re.search(rf"(^|\s){re.escape(word)}(\s|$)", command), word
