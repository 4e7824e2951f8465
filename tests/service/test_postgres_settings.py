"""PostgreSQL is configured for the machine: the embedded server's memory
settings are derived from the memory and written where the server reads
them, and compose's defaults are the same derivation for 8 GiB."""

from __future__ import annotations

import re
from pathlib import Path

from benchdb import embedded

ROOT = Path(__file__).resolve().parents[2]
GIB = 1 << 30


def test_it_derives_the_settings_from_the_memory():
    small = embedded.postgres_settings(2 * GIB)
    assert small["shared_buffers"] == "512MB"  # a quarter
    assert small["effective_cache_size"] == "1536MB"  # three quarters
    assert small["work_mem"] == "5MB"
    big = embedded.postgres_settings(256 * GIB)
    assert big["shared_buffers"] == "8192MB"  # at most 8 GiB
    assert big["work_mem"] == "64MB"  # at most 64 MiB
    assert big["maintenance_work_mem"] == "1024MB"
    tiny = embedded.postgres_settings(256 << 20)
    assert tiny["shared_buffers"] == "128MB"  # never below the default
    assert tiny["work_mem"] == "4MB"


def test_a_given_memory_replaces_the_machines(monkeypatch):
    monkeypatch.setenv("BENCHDB_PG_MEMORY", "4GB")
    assert embedded.memory_bytes() == 4 * GIB
    monkeypatch.setenv("BENCHDB_PG_MEMORY", "512MB")
    assert embedded.memory_bytes() == 512 << 20
    monkeypatch.delenv("BENCHDB_PG_MEMORY")
    assert embedded.memory_bytes() > 0


def test_the_settings_are_written_once_and_included(tmp_path, monkeypatch):
    monkeypatch.setenv("BENCHDB_PG_MEMORY", "8GB")
    (tmp_path / "postgresql.conf").write_text("max_connections = 100\n")
    assert embedded.write_settings(tmp_path) is True
    assert embedded.write_settings(tmp_path) is False  # unchanged
    conf = (tmp_path / "postgresql.conf").read_text()
    assert conf.count("include_if_exists = 'benchdb.conf'") == 1
    written = (tmp_path / embedded.SETTINGS_FILE).read_text()
    assert "shared_buffers = '2048MB'" in written
    monkeypatch.setenv("BENCHDB_PG_MEMORY", "16GB")
    assert embedded.write_settings(tmp_path) is True
    conf = (tmp_path / "postgresql.conf").read_text()
    assert conf.count("include_if_exists") == 1


def test_compose_defaults_are_the_derivation_for_8_gib():
    compose = (ROOT / "docker" / "compose.yml").read_text()
    found = dict(re.findall(r"- ([a-z_]+)=\$\{PG_[A-Z_]+:-([0-9]+MB)\}", compose))
    assert found == embedded.postgres_settings(8 * GIB)
    example = (ROOT / "docker" / ".env.example").read_text()
    for name, value in found.items():
        assert f"#PG_{name.upper()}={value}" in example
