"""The single-file agent is whole, however the agent that builds it was started.

``vm`` copies the agent into the guest as a ``.pyz`` it builds from the agent
that is running: from a source tree, a pip install, or the downloaded
``benchdb-agent.pyz`` itself.  Each must build the same complete file (a
guest that receives less fails with ModuleNotFoundError, after the host
baseline was already measured and sent).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from benchdb_agent import zipapp_build

ROOT = Path(__file__).resolve().parent.parent.parent

# Run in a fresh interpreter with ``where`` first on sys.path: prints where
# the agent was imported from, then writes the .pyz it builds to argv[2].
BUILD_FROM = """
import sys
sys.path.insert(0, sys.argv[1])
from benchdb_agent import zipapp_build
print(zipapp_build.__file__)
open(sys.argv[2], "wb").write(zipapp_build.build_bytes())
"""


def _build_from(where: Path, out: Path) -> bytes:
    proc = subprocess.run(
        [sys.executable, "-c", BUILD_FROM, str(where), str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(str(where)), proc.stdout  # not the source tree
    return out.read_bytes()


def _members(data: bytes) -> set:
    import io

    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        return set(zf.namelist())


def test_the_source_tree_builds_every_module_and_the_schema():
    members = _members(zipapp_build.build_bytes())
    package = ROOT / "agent" / "benchdb_agent"
    expected = {
        "benchdb_agent/" + p.relative_to(package).as_posix()
        for p in package.rglob("*")
        if p.suffix in (".py", ".json") and "__pycache__" not in p.parts
    }
    assert "benchdb_agent/hostconfig/qemu.py" in expected
    assert members == expected | {"__main__.py"}


def test_the_pyz_builds_itself_byte_for_byte(tmp_path):
    pyz = tmp_path / "benchdb-agent.pyz"
    source_built = zipapp_build.build_bytes()
    pyz.write_bytes(source_built)
    rebuilt = _build_from(pyz, tmp_path / "again.pyz")
    assert len(rebuilt) > 50_000  # the 200-byte archive had only __main__.py
    assert rebuilt == source_built
    # And what it built runs.
    proc = subprocess.run(
        [sys.executable, str(tmp_path / "again.pyz"), "--version"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0 and proc.stdout.startswith("benchdb-agent "), proc


def test_a_pip_installed_agent_builds_the_same_file(tmp_path):
    """The files a pip install lays out: setuptools' build_py, which its wheel
    is made of (this venv has no ``wheel`` for a real offline ``pip install``),
    run on a copy so the tree is left as it was."""
    project = tmp_path / "agent"
    shutil.copytree(
        ROOT / "agent", project, ignore=shutil.ignore_patterns("*.egg-info", "build")
    )
    site = tmp_path / "site"
    proc = subprocess.run(
        [sys.executable, "-c", "from setuptools import setup; setup()"]
        + ["-q", "build_py", "--build-lib", str(site)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=project,
    )
    assert proc.returncode == 0, proc.stderr
    assert _build_from(site, tmp_path / "pip.pyz") == zipapp_build.build_bytes()


def test_an_agent_whose_files_cannot_be_read_says_so(monkeypatch, tmp_path):
    monkeypatch.setattr(zipapp_build, "PACKAGE", tmp_path)
    with pytest.raises(zipapp_build.BuildError, match="cli.py"):
        zipapp_build.build_bytes()
