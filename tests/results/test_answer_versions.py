"""A stored answer knows its code (results/answers.py).

Each answer in the catalogue has a version, part of the key it is stored
under.  Its computation (the compute function with the benchdb functions
and constants it reaches, ``answers.source_hash``) is pinned here by hash:
changing how an answer is computed without a new version fails, so an
answer computed by older code is never served after a deploy.
"""

from __future__ import annotations

import ast
import inspect
import json
import textwrap
from pathlib import Path

from benchdb.results import answers

PINNED = Path(__file__).with_name("answer_versions.json")


def test_every_computation_change_comes_with_a_new_version():
    pinned = json.loads(PINNED.read_text())
    problems = []
    for name, answer in answers.CATALOGUE.items():
        now = {"version": answer.version, "source": answers.source_hash(answer.live)}
        was = pinned.get(name)
        if was == now:
            continue
        if was is None:
            problems.append(f"{name}: new answer; pin it as {json.dumps(now)}")
        elif was["source"] != now["source"] and was["version"] == now["version"]:
            bumped = {"version": answer.version + 1, "source": now["source"]}
            problems.append(
                f"{name}: its computation changed ({answer.path} or what it "
                f"calls) but its version is still {answer.version}: bump the "
                f"version in benchdb/results/answers.py and pin it as "
                f"{json.dumps(bumped)}"
            )
        else:
            problems.append(f"{name}: pin it as {json.dumps(now)}")
    gone = sorted(set(pinned) - set(answers.CATALOGUE))
    problems += [f"{name}: no longer declared; remove its pin" for name in gone]
    assert not problems, f"in {PINNED.relative_to(Path.cwd())}:\n" + "\n".join(problems)


def test_the_version_is_part_of_the_stored_key():
    for name, answer in answers.CATALOGUE.items():
        assert answer.key == f"{name}@{answer.version}"
        assert answers.by_key(answer.key) is answer
        assert answers.by_key(f"{name}@{answer.version - 1}") is None


def test_the_hash_ignores_comments_and_docstrings_but_not_code():
    def one(x):
        """Doc."""
        # a comment
        return x + 1

    def two(x):
        return x + 1

    def three(x):
        return x + 2

    def body(fn):
        # The function's own name differs, its code may not: after the name.
        source = textwrap.dedent(inspect.getsource(fn))
        return answers._tokens(source, ast.parse(source)).split(":", 1)[1]

    assert body(one) == body(two) != body(three)
    assert answers.source_hash(one) != answers.source_hash(three)
