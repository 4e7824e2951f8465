"""One vocabulary: every facet list is derived from the agent's, not restated.

``benchdb_agent.vocab.SETTINGS`` declares each setting once (its vocabulary,
label, where it is kept, whether it is a tag, whether the host reads it).
These tests fail when a setting is added there but a list that should carry
it does not (the lists are checked against the table, setting by setting),
and when a module lists setting names as a literal of its own instead of
importing them (``test_no_literal_lists_of_settings``).
"""

from __future__ import annotations

import ast
from pathlib import Path

from django.http import QueryDict

from benchdb.api.serializers import RUN_LIST_FIELDS, RunListSerializer
from benchdb.results import (
    aggregates,
    exports,
    ingest,
    reads,
    reports,
    similar,
    summaries,
    vocab,
)
from benchdb.results.filters import RunFilterSet
from benchdb.results.models import LISTED_FACET_COLUMNS
from benchdb.web import present
from benchdb_agent import contract, vm
from benchdb_agent import vocab as agent_vocab
from benchdb_agent.hostconfig import model as hostconfig_model
from benchdb_agent.hostconfig import proxmox

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = agent_vocab.SETTINGS
CLOSED = [
    s for s in SETTINGS if s.column and s.vocabulary not in (None, agent_vocab.YES_NO)
]
COLUMNS = [s for s in SETTINGS if s.column]


def test_every_closed_setting_is_a_facet_everywhere():
    menu = {f["name"]: f["label"] for f in reads._facet_menu(QueryDict(), {})}
    listed = reads.vocabularies()["vocabularies"]
    for s in CLOSED:
        assert s.name in {**vocab.FACETS, **vocab.HARDWARE_FACETS}, s.name
        assert s.name in summaries.FACET_PATHS, s.name
        assert s.name in RunFilterSet.base_filters, s.name
        assert menu[s.name] == present.FACET_WORDS[s.name] == s.label
        assert [(o["value"], o["label"]) for o in listed[s.name]] == list(s.vocabulary)
        assert list(vocab.CHOICES[s.name].choices) == list(s.vocabulary)
        if s.column == "run":
            assert s.name in LISTED_FACET_COLUMNS, s.name


def test_every_column_is_exported_grouped_and_described():
    described = [label for label, _get in present.ATTRIBUTES]
    for s in COLUMNS:
        assert s.name in exports.EXPORT_COLUMNS, s.name
        assert s.name in aggregates.GROUP_BY, s.name
        if s.environment:
            assert s.label in described, s.name
        if s.tag:
            assert s.name in present.COLUMN_TAGS, s.name
        if s.column == "run" and s.environment:
            assert s.name in RUN_LIST_FIELDS, s.name
    assert RunListSerializer.Meta.fields is RUN_LIST_FIELDS
    # A tag not shown as a column of its own stays visible as a tag.
    assert not present.COLUMN_TAGS & {s.name for s in SETTINGS if not s.column}


def test_every_tag_the_agent_takes_and_the_host_reads():
    tags = {s.name for s in SETTINGS if s.tag}
    assert set(agent_vocab.TAG_VOCABULARIES) == tags
    assert set(reads.vocabularies()["tags"]) == tags
    assert set(contract.json_schema()["properties"]["tags"]["properties"]) == tags
    host = [s.name for s in SETTINGS if s.host]
    assert vm.HOST_TAGS == tuple(host)
    assert [tag for tag, _field in hostconfig_model.TAG_FIELDS] == [
        s.name for s in SETTINGS if s.host and s.vocabulary is not None
    ]
    run_columns = {s.name for s in SETTINGS if s.tag and s.column == "run"}
    assert set(ingest.RUN_TAG_COLUMNS) | {"iothread"} == run_columns


def test_the_layout_and_the_cache_modes():
    layout = [s.name for s in SETTINGS if s.layout]
    assert list(similar.SIMILAR_MATCH) == layout
    assert set(summaries.GROUP_KEY) >= set(layout) - {"cache_mode"}
    assert "cache_mode" not in summaries.GROUP_KEY
    modes = list(agent_vocab.CACHE_MODES)
    assert modes == list(agent_vocab.CACHE_MODE_SAFETY)
    assert set(modes) == set(hostconfig_model.MODE_FLAGS)
    for derived in (
        summaries.CACHE_ORDER,
        reads.CACHE_ORDER,
        reports.CACHE_MODES,
        vm.CACHE_MODES,
        proxmox.CACHE_MODES,
    ):
        assert list(derived) == modes


# Literals that name three settings or more on purpose: a chosen few for one
# page or one resource, not "the facets".  Each says why it is its own list.
# (file, the name the literal is assigned to or the function it is in)
CHOSEN = {
    # The hardware resource's own fields (a Hardware row, not a run).
    ("benchdb/api/serializers.py", "HardwareSerializer.Meta"),
    ("benchdb/results/rows.py", "HARDWARE_FIELDS"),
    ("benchdb/results/ingest.py", "_hardware"),
    # The admin's chosen columns and filters.
    ("benchdb/results/admin.py", "RunAdmin"),  # list_display, list_filter
    # What a comparison names a run by, and reads to do it.
    ("benchdb/results/compare.py", "COMPARED_RUN_FIELDS"),
    ("benchdb/results/compare.py", "RunLabel.label"),
    ("benchdb/results/reads.py", "BASELINE_SHOWN"),
    # The columns a home or browse row shows, read alone (not every column).
    ("benchdb/results/reads.py", "PAGE_ROW_COLUMNS"),
    # The columns the free-text search looks in, and the sortable ones.
    ("benchdb/results/filters.py", "SEARCH_FIELDS"),
    ("benchdb/results/filters.py", "ORDERING_FIELDS"),
    # The home page's three headline counts; the reports' setup form.
    ("benchdb/results/reads.py", "home_counts"),
    ("benchdb/web/answers.py", "SETUP_FIELDS"),
    # What an import asks the uploader; free-text tags' column lengths.
    ("agent/benchdb_agent/imports.py", "DECLARED_FACETS"),
    ("agent/benchdb_agent/contract.py", "TAG_MAX_LENGTH"),
    # QEMU's answer read into a Disk's fields (aio, bus: not tag names).
    ("agent/benchdb_agent/hostconfig/qmp.py", "disks"),
}
# Vocabulary modules, the published reference data, and migrations.
NOT_SCANNED = ("vocab.py", "reference", "migrations")


def literal_lists(path: Path):
    """(owner, names) of each list, tuple, set or dict literal of ``path``
    naming three settings or more; owner: the function or class it is in
    (``Class.method``), or at module level the name it is assigned to."""
    names = {s.name for s in SETTINGS}
    tree = ast.parse(path.read_text())
    owners = {}
    for parent in ast.walk(tree):
        for child in ast.iter_child_nodes(parent):
            owners[child] = parent
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            items = [k for k in node.keys if k is not None]
        elif isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            items = node.elts
        else:
            continue
        found = [
            e.value for e in items if isinstance(e, ast.Constant) and e.value in names
        ]
        if len(found) < 3:
            continue
        scopes, assigned, at = [], None, node
        while at in owners:
            at = owners[at]
            if isinstance(at, (ast.FunctionDef, ast.ClassDef)):
                scopes.insert(0, at.name)
            elif isinstance(at, ast.Assign) and isinstance(at.targets[0], ast.Name):
                assigned = assigned or at.targets[0].id
        yield ".".join(scopes) or assigned, found


def test_no_literal_lists_of_settings():
    restated = []
    for top in ("benchdb", "agent/benchdb_agent"):
        for path in sorted((ROOT / top).rglob("*.py")):
            relative = path.relative_to(ROOT)
            if set(relative.parts) & set(NOT_SCANNED):
                continue
            for owner, found in literal_lists(path):
                if (str(relative), owner) not in CHOSEN:
                    restated.append(f"{relative} ({owner}): {', '.join(found)}")
    assert not restated, (
        "settings listed by name instead of derived from benchdb/results/vocab.py "
        "(or benchdb_agent.vocab); derive them, or add the literal to CHOSEN "
        "with why it is a list of its own:\n" + "\n".join(restated)
    )
