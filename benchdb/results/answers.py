"""The catalogue of stored answers: each declared once, with its version.

A stored answer is an across-runs figure too costly to compute per request
(a GROUP BY over every listed run, a bootstrap over a population), kept in
``results_answersummary`` and served by the data version
(``answer_cache``).  Each is declared here once: its name, the function that
computes it (a plain function of JSON-able arguments in the results module
of its subject), a version, and the arguments the pages show without a
choice (``defaults``, computed by every refresh so the first reader after
an upload finds them).

- **The key includes the version.**  A row is stored as ``name@version``;
  an answer stored by older code is never read, and the refresh drops it.
- **A change to the computation needs a new version.**
  ``tests/results/test_answer_versions.py`` hashes each compute function
  with the benchdb functions and constants it reaches (``source_hash``) and
  fails when a hash changes while its version did not.
- **Readers only read.**  The API, the pages and the read functions call
  ``answers.<name>(*args)`` or ``answers.<name>.with_freshness(*args)``;
  ``answers.<name>.live`` is the compute function itself.
- **The refresh walks the catalogue** (``results.refresh``).

Compute functions are named by their dotted path and imported when first
used, so a module may both compute an answer and read it stored (a similar
system's rank reads its stored population) without an import circle: this
module imports nothing of benchdb but ``answer_cache``.
"""

from __future__ import annotations

import ast
import hashlib
import importlib
import inspect
import io
import textwrap
import tokenize
import types
from collections.abc import Callable, Iterable

from benchdb.results import answer_cache


class Answer:
    """One stored answer: its name, its compute function as
    ``"module:function"``, its version (part of the key it is stored under).

    ``defaults``: the argument tuples every refresh keeps current, or a
    function of no arguments that returns them (read when the refresh runs,
    e.g. from another answer).
    """

    def __init__(
        self,
        name: str,
        compute: str,
        version: int,
        defaults: Iterable[tuple] | Callable[[], Iterable[tuple]] = (),
        without: str | None = None,
        reached: str | None = None,
    ):
        self.name = name
        self.path = compute
        self.version = version
        self._defaults = defaults
        self._without_path = without
        self._reached_path = reached
        self._live = None
        self._without = None
        self._reached = None

    def __repr__(self) -> str:
        return f"<answer {self.key}: {self.path}>"

    @property
    def key(self) -> str:
        """What the rows of this answer are stored under: name and version."""
        return f"{self.name}@{self.version}"

    @property
    def live(self) -> Callable:
        """The compute function (imported on first use)."""
        if self._live is None:
            module, _, attr = self.path.partition(":")
            self._live = getattr(importlib.import_module(module), attr)
        return self._live

    @property
    def without(self) -> Callable | None:
        """``without(answer, run_ids)``: a stored answer with those runs left
        out, or None if it cannot be; None for an answer that names no run
        (it only counts and summarises them)."""
        if self._without is None and self._without_path:
            module, _, attr = self._without_path.partition(":")
            self._without = getattr(importlib.import_module(module), attr)
        return self._without

    @property
    def reached(self) -> Callable | None:
        """``reached(run_ids, *args)``: False if a change of those runs cannot
        change ``answer(*args)`` (``results.changes``), so the refresh stamps
        it current as it is; None: any change reaches it."""
        if self._reached is None and self._reached_path:
            module, _, attr = self._reached_path.partition(":")
            self._reached = getattr(importlib.import_module(module), attr)
        return self._reached

    def defaults(self) -> list[tuple]:
        found = self._defaults() if callable(self._defaults) else self._defaults
        return [tuple(args) for args in found]

    def with_freshness(self, *args) -> tuple:
        """(answer, Freshness): stored if it may be served, else computed in
        one snapshot and stored.  Inside another answer's computation it is
        computed in that snapshot instead (Freshness None)."""
        if answer_cache.computing():
            return self.live(*args), None
        return answer_cache.fetch_or_compute(self.key, self.live, args, self.without)

    def __call__(self, *args):
        return self.with_freshness(*args)[0]


CATALOGUE: dict[str, Answer] = {}


def declare(
    name: str,
    compute: str,
    version: int,
    defaults=(),
    without: str | None = None,
    reached: str | None = None,
) -> Answer:
    """Add an answer to the catalogue (once per name).  An answer that names
    runs (their ids, for a page to show them) declares ``without``, the
    ``"module:function"`` that leaves removed runs out of it: while it is
    computed again after a removal, readers are served that
    (``answer_cache.fetch_or_compute``); one that only counts and summarises
    runs is served as it was, said to be updating.  ``reached``: the
    ``"module:function"`` (``results.changes``) that tells whether changed
    runs can reach an answer: the refresh recomputes only those."""
    if name in CATALOGUE:
        raise ValueError(f"answer {name!r} is declared twice")
    CATALOGUE[name] = answer = Answer(
        name, compute, version, defaults, without, reached
    )
    return answer


def by_key(key: str) -> Answer | None:
    """The declared answer a stored row's name is, if its version is current."""
    name, _, _version = key.partition("@")
    answer = CATALOGUE.get(name)
    return answer if answer is not None and answer.key == key else None


# The reports' direct answers (results.reports) -------------------------------


def _first_workload(question: str) -> list:
    """The workload a report opens on without a setup (the one its
    coverage ranks first), for the refresh to keep current."""
    reports = importlib.import_module("benchdb.results.reports")
    options = reports.choose_workload(
        question, workloads(question), workload_coverage(question, {})
    )
    return [reports.workload_arg(w) for w in options[:1]]


workloads = declare(
    "workloads",
    "benchdb.results.reports:workloads",
    version=5,
    defaults=[("cache",), ("overhead",)],
)
workload_coverage = declare(
    "workload_coverage",
    "benchdb.results.reports:workload_coverage",
    version=5,
    defaults=[("cache", {}), ("overhead", {})],
)
setups_with_data = declare(
    "setups_with_data",
    "benchdb.results.reports:setups_with_data",
    version=3,
    defaults=[("cache",), ("overhead",)],
)
cache_mode_answers = declare(
    "cache_mode_answers",
    "benchdb.results.reports:cache_mode_answers",
    version=12,
    defaults=lambda: [({}, w) for w in _first_workload("cache")],
    reached="benchdb.results.changes:setup",
)
cache_mode_ranking = declare(
    "cache_mode_ranking",
    "benchdb.results.reports:cache_mode_ranking",
    version=10,
    defaults=lambda: [({}, w) for w in _first_workload("cache")],
    reached="benchdb.results.changes:setup_workload",
)
left_out_counts = declare(
    "left_out_counts",
    "benchdb.results.reports:left_out_counts",
    version=1,
)
overhead_answer = declare(
    "overhead_answer",
    "benchdb.results.reports:overhead_answer",
    version=9,
    defaults=lambda: [({}, w) for w in _first_workload("overhead")],
    reached="benchdb.results.changes:setup",
)
overhead_by = declare(
    "overhead_by",
    "benchdb.results.reports:overhead_by",
    version=9,
    defaults=lambda: [("storage_backend", {}, w) for w in _first_workload("overhead")],
    reached="benchdb.results.changes:field_setup",
)

# Populations over run filters, /api/v1/population/ (results.population) -------

distribution = declare(
    "distribution",
    "benchdb.results.population:distribution_over",
    version=6,
    reached="benchdb.results.changes:filters_test",
)
compare_sets = declare(
    "compare_sets",
    "benchdb.results.population:compare_sets_over",
    version=11,
    reached="benchdb.results.changes:two_filters_test",
)
rank_settings = declare(
    "rank_settings",
    "benchdb.results.population:rank_settings_over",
    version=10,
    reached="benchdb.results.changes:filters_facet_test",
)

# Browse, home and report pages' counts (results.reads) -----------------------

listed_facet_counts = declare(
    "listed_facet_counts",
    "benchdb.results.reads:listed_facet_counts",
    version=2,
    defaults=[()],
)
home_counts = declare(
    "home_counts", "benchdb.results.reads:home_counts", version=1, defaults=[()]
)
overhead_summary = declare(
    "overhead_summary",
    "benchdb.results.reads:overhead_summary_answer",
    version=4,
    defaults=[()],
)
cache_mode_group_page = declare(
    "cache_mode_group_page",
    "benchdb.results.reads:cache_mode_group_page",
    version=1,
    defaults=[(1,)],
    without="benchdb.results.summaries:cache_mode_pages_without",
)

# Similar systems and aggregates (results.compare) ----------------------------

similar_population = declare(
    "similar_population",
    "benchdb.results.similar:similar_population",
    version=4,
    reached="benchdb.results.changes:comparability_key",
)
# A run page's rank: the same population's count and points at every half
# percent, a few KB where the population is hundreds of KB at 3M results.
similar_points = declare(
    "similar_points",
    "benchdb.results.similar:similar_points",
    version=1,
    reached="benchdb.results.changes:comparability_key",
)
aggregates = declare(
    "aggregates",
    "benchdb.results.aggregates:stored_aggregates",
    version=4,
    reached="benchdb.results.changes:filters_test",
)


# What a version stands for ---------------------------------------------------


def source_hash(fn: Callable) -> str:
    """A hash of what ``fn`` computes: its code and that of every benchdb
    function it reaches through names (module functions, ``module.function``),
    with the simple constants they read (numbers, strings, and tuples, lists,
    sets and dicts of them).  Comments, docstrings and line breaks do not
    count; classes (models) are not followed."""
    seen: dict[str, str] = {}
    _reach(inspect.unwrap(fn), seen)
    digest = hashlib.sha256()
    for name in sorted(seen):
        digest.update(f"{name}\n{seen[name]}\n".encode())
    return digest.hexdigest()[:16]


def _ours(obj) -> bool:
    return (getattr(obj, "__module__", None) or "").startswith("benchdb.")


def _reach(fn, seen: dict[str, str]) -> None:
    name = f"{fn.__module__}.{fn.__qualname__}"
    if name in seen:
        return
    source = textwrap.dedent(inspect.getsource(fn))
    tree = ast.parse(source)
    seen[name] = _tokens(source, tree)
    scope = dict(fn.__globals__)
    # Imports inside the function bind names too.
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            module = importlib.import_module(node.module)
            for alias in node.names:
                value = getattr(module, alias.name, None)
                if value is None:
                    value = importlib.import_module(f"{node.module}.{alias.name}")
                scope[alias.asname or alias.name] = value
    for node in ast.walk(tree):
        found = None
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            base = scope.get(node.value.id)
            if isinstance(base, types.ModuleType) and base.__name__.startswith(
                "benchdb."
            ):
                found = (f"{base.__name__}.{node.attr}", getattr(base, node.attr, None))
        elif isinstance(node, ast.Name) and node.id in scope:
            found = (f"{fn.__module__}:{node.id}", scope[node.id])
        if found is None:
            continue
        label, value = found
        if isinstance(value, types.FunctionType) and _ours(value):
            _reach(inspect.unwrap(value), seen)
        elif hasattr(value, "__wrapped__") and _ours(inspect.unwrap(value)):
            _reach(inspect.unwrap(value), seen)
        else:
            constant = _constant(value)
            if constant is not None:
                seen.setdefault(label, constant)


def _constant(value) -> str | None:
    if value is None or isinstance(value, bool | int | float | str | bytes):
        return repr(value)
    if isinstance(value, tuple | list):
        parts = [_constant(v) for v in value]
        return None if None in parts else f"[{', '.join(parts)}]"
    if isinstance(value, set | frozenset):
        parts = [_constant(v) for v in value]
        return None if None in parts else "{" + ", ".join(sorted(parts)) + "}"
    if isinstance(value, dict):
        parts = [(_constant(k), _constant(v)) for k, v in value.items()]
        if any(k is None or v is None for k, v in parts):
            return None
        return "{" + ", ".join(f"{k}: {v}" for k, v in parts) + "}"
    return None


def _tokens(source: str, tree: ast.Module) -> str:
    """The source's tokens without comments, line breaks and docstrings;
    blocks and statements marked, so only code that reads the same in
    Python hashes the same."""
    docstrings = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
            and ast.get_docstring(node, clean=False) is not None
        ):
            first = node.body[0]
            docstrings.add((first.lineno, first.col_offset))
    marks = {tokenize.INDENT: "{", tokenize.DEDENT: "}", tokenize.NEWLINE: ";"}
    kept, after_docstring = [], False
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type in (tokenize.COMMENT, tokenize.NL, tokenize.ENCODING):
            continue
        if token.start in docstrings:
            after_docstring = True
            continue
        if after_docstring and token.type == tokenize.NEWLINE:
            after_docstring = False
            continue
        after_docstring = False
        kept.append(marks.get(token.type, token.string))
    return " ".join(kept)
