"""A full disk at --out does not lose a finished run: the bundle goes to the
spool folder (or the current folder) and the agent says where.

A real, small ext4 on a loop device, filled to the brim, as --out; needs
root (tests/agent/test_target_filesystem.py's filesystems).
"""

from __future__ import annotations

import json

from benchdb_agent import upload
from tests.agent import test_target_filesystem as filesystems
from tests.agent.test_target_filesystem import MiB, agent

# Root, losetup and mount, as there; and its filesystems fixture.
pytestmark = filesystems.pytestmark
mounted = filesystems.mounted


def fill(folder) -> None:
    """Write zeros until the filesystem refuses another block."""
    with open(folder / "filler", "wb") as fh:
        try:
            while True:
                fh.write(b"\0" * 65536)
                fh.flush()
        except OSError:
            pass


def test_a_full_out_puts_the_bundle_in_the_spool_and_says_where(mounted, tmp_path):
    target = mounted(128 * MiB)
    full = mounted(4 * MiB)
    fill(full)
    out = full / "bundle.json"
    spool = tmp_path / "spool"
    done = agent(
        "run", "--target", str(target), "--test", "fio-rand-read-4k-q1t1",
        "--size", "4M", "--runtime", "1", "--repeats", "1",
        "--out", str(out), "--spool-dir", str(spool),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    kept = spool / "bundles" / "bundle.json"
    assert f"could not write the bundle to {out}" in done.stderr
    assert f"written to {kept} instead" in done.stderr
    doc = json.loads(kept.read_text())
    assert doc["tests"][0]["test_id"] == "fio-rand-read-4k-q1t1"
    # Nothing half-written at --out, and `upload --pending` does not take it.
    assert sorted(p.name for p in full.iterdir()) == ["filler", "lost+found"]
    assert upload.pending(spool) == []


def test_with_no_spool_room_either_it_goes_to_the_current_folder(
    mounted, tmp_path, monkeypatch
):
    full = mounted(4 * MiB)
    fill(full)
    monkeypatch.chdir(tmp_path)
    said = []
    where = upload.write_bundle('{"a": 1}', str(full / "b.json"), full, said.append)
    assert where == str(tmp_path / "b.json")
    assert json.loads((tmp_path / "b.json").read_text()) == {"a": 1}
    assert "free in" in said[0] and f"written to {where} instead" in said[0]
