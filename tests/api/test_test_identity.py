"""What a test is comes from its raw output, never from the client's word.

The contract (``benchdb_agent.contract._identity``) checks the tool, the
workload, the catalogue test id and the comparability key of every test
against what its raw outputs say, for fio, ioping and dd alike (dd's block
size and count from its bytes copied and records out): each
mis-keyed upload below was stored before (and counted in that test's
aggregates, ranks and population answers); now it is refused with 400
naming the field, before any 202 and with nothing written.
"""

from __future__ import annotations

import copy
import gzip
import json
import subprocess
from pathlib import Path

import pytest

from benchdb_agent import bundle as agent_bundle
from benchdb_agent import parsers, suite
from tests.api.factories import make_bundle, pack
from tests.api.test_contract import refused

pytestmark = pytest.mark.django_db

URL = "/api/v1/submissions/"
SAMPLES = Path(__file__).resolve().parent.parent / "samples"
RAND_4K_Q32 = "fio-rand-read-4k-q32t1"
SEQ_1M = "fio-seq-read-1m-q1t1"
RAND_4K = "fio-rand-read-4k-q1t1"


def catalogue_key(test_id: str, version: str) -> str:
    """The key the agent gives a catalogue test run with its own options."""
    info = suite.get_test(test_id)
    return suite.comparability_key(test_id, info["tool"], info["options"], version)


def refused_by_both(api, doc, pointer: str) -> str:
    """Refused by the agent's check and by the server (400, nothing stored),
    with ``pointer`` named; the server's message."""
    assert pointer in [p for p, _m in agent_bundle.validate(doc)]
    errors = refused(api, doc, pointer)
    return next(e["message"] for e in errors if e["pointer"] == pointer)


def test_a_1m_sequential_read_under_the_4k_random_q32_key_is_refused(api, fio):
    doc = make_bundle(fio, tests=(SEQ_1M,))
    test = doc["tests"][0]
    test["comparability_key"] = catalogue_key(RAND_4K_Q32, test["tool_version"])
    message = refused_by_both(api, doc, "/tests/0/comparability_key")
    assert RAND_4K_Q32 in message and SEQ_1M in message


def test_a_4k_test_id_on_1m_data_is_refused(api, fio):
    doc = make_bundle(fio, tests=(SEQ_1M,))
    test = doc["tests"][0]
    # Its id, options and key all say 4 KiB random reads at Q32: only the raw
    # output says what ran.
    test["test_id"] = RAND_4K_Q32
    test["options"] = {**test["options"], **suite.get_test(RAND_4K_Q32)["options"]}
    test["options"]["ioengine"] = "psync"
    del test["options"]["bs"], test["options"]["rw"], test["options"]["iodepth"]
    test["comparability_key"] = suite.comparability_key(
        RAND_4K_Q32, "fio", test["options"], test["tool_version"]
    )
    message = refused_by_both(api, doc, "/tests/0/test_id")
    assert "runs rw=randread" in message and "fio job with rw=read" in message


def test_ioping_claimed_on_a_fio_json_raw_is_refused(api, fio):
    doc = make_bundle(fio, tests=(RAND_4K,))
    test = doc["tests"][0]
    test["tool"] = "ioping"
    test["comparability_key"] = suite.comparability_key(
        RAND_4K, "ioping", test["options"], test["tool_version"]
    )
    message = refused_by_both(api, doc, "/tests/0/tool")
    assert "'ioping', but the raw output is fio's (fio-json)" in message


def test_dd_with_bs_1m_claimed_on_a_4k_fio_raw_is_refused(api, fio):
    doc = make_bundle(fio, tests=(RAND_4K,))
    test = doc["tests"][0]
    # The fio options check used to run only when the claimed tool was fio.
    test["tool"] = "dd"
    test["options"] = {"bs": "1m", "count": "4", "conv": "fdatasync"}
    test["comparability_key"] = suite.comparability_key(
        RAND_4K, "dd", test["options"], test["tool_version"]
    )
    refused_by_both(api, doc, "/tests/0/tool")
    errors = refused(api, doc, "/tests/0/repeats/0/raw")
    assert any("bs=4k" in e["message"] and "bs=1m" in e["message"] for e in errors)


def test_fio_claimed_on_a_dd_raw_is_refused(api, fio):
    doc = make_bundle(fio, tests=("dd-write-1m-fdatasync",))
    doc["tests"][0]["tool"] = "fio"
    message = refused_by_both(api, doc, "/tests/0/tool")
    assert "the raw output is dd's (dd)" in message


def dd_bundle(fio, tmp_path, bs: str, count: int, options: dict) -> dict:
    """A bundle whose one test is a real GNU dd write of ``count`` blocks of
    ``bs``, sent with ``options`` as the dd test of the catalogue."""
    command = ["dd", "if=/dev/zero", f"of={tmp_path / 'dd.bin'}", f"bs={bs}"]
    command += [f"count={count}", "conv=fdatasync"]
    text = subprocess.run(
        command, capture_output=True, text=True, check=True, timeout=60
    ).stderr
    parsed = parsers.parse(text, "dd", direction="write")
    doc = make_bundle(fio, tests=("dd-write-1m-fdatasync",))
    test = doc["tests"][0]
    test["options"] = options
    test["command"] = command
    test["comparability_key"] = suite.comparability_key(
        test["test_id"], "dd", options, test["tool_version"] or None
    )
    test["repeats"] = [
        {
            "index": 0,
            "records": parsed["records"],
            "raw": {"format": "dd", "encoding": "plain", "data": text},
        }
    ]
    return doc


def test_a_dd_test_is_its_block_size_and_count(api, fio, tmp_path):
    honest = {"bs": "1M", "count": "4", "conv": "fdatasync", "if": "/dev/zero"}
    assert not agent_bundle.validate(dd_bundle(fio, tmp_path, "1M", 4, honest))
    # 4 MiB either way, but dd says it copied four blocks of 1 MiB.
    doc = dd_bundle(fio, tmp_path, "1M", 4, {**honest, "bs": "4k", "count": "1024"})
    message = refused_by_both(api, doc, "/tests/0/repeats/0/raw")
    assert "dd job with bs=1048576" in message and "say bs=4k" in message
    doc = dd_bundle(fio, tmp_path, "1M", 4, {**honest, "count": "8"})
    refused_by_both(api, doc, "/tests/0/repeats/0/raw")
    # 4 KiB blocks sent as the catalogue's 1 MiB dd test: its id says 1M.
    doc = dd_bundle(fio, tmp_path, "4k", 1024, {**honest, "bs": "4k", "count": "1024"})
    message = refused_by_both(api, doc, "/tests/0/test_id")
    assert "runs bs=1m" in message and "bs=4096" in message


def ioping_bundle(fio, test_id: str) -> dict:
    """A bundle whose one test is a real ioping 1.3 output (4 KiB requests)."""
    text = (SAMPLES / "ioping" / "read-1.3.json").read_text()
    parsed = parsers.parse(text, "ioping-json")
    doc = make_bundle(fio, tests=(RAND_4K,))
    options = {**suite.get_test(test_id)["options"], "count": "4"}
    doc["tests"] = [
        {
            "test_id": test_id,
            "tool": "ioping",
            "direction": "read",
            "options": options,
            "tool_version": parsed["tool_version"],
            "comparability_key": suite.comparability_key(
                test_id, "ioping", options, parsed["tool_version"]
            ),
            "repeats": [
                {
                    "index": 0,
                    "records": parsed["records"],
                    "raw": {
                        "format": "ioping-json",
                        "encoding": "gzip+base64",
                        "data": pack(text),
                    },
                }
            ],
        }
    ]
    return doc


def test_an_ioping_test_is_its_request_size(api, fio):
    assert not agent_bundle.validate(ioping_bundle(fio, "ioping-read-4k"))
    doc = ioping_bundle(fio, "ioping-read-512")
    message = refused_by_both(api, doc, "/tests/0/repeats/0/raw")
    assert "size=4096" in message and "size=512" in message
    # Options made to agree with the raw output: the id still says 512 bytes.
    doc["tests"][0]["options"]["size"] = "4k"
    doc["tests"][0]["comparability_key"] = suite.comparability_key(
        "ioping-read-512", "ioping", doc["tests"][0]["options"], "ioping >=1.2"
    )
    refused_by_both(api, doc, "/tests/0/test_id")


def test_a_key_that_is_not_the_tests_own_is_refused(api, fio):
    doc = make_bundle(fio, tests=(RAND_4K,))
    doc["tests"][0]["comparability_key"] = "anything|at|all"
    refused_by_both(api, doc, "/tests/0/comparability_key")
    # A tool major version the test does not have.
    doc = make_bundle(fio, tests=(RAND_4K,))
    test = doc["tests"][0]
    test["comparability_key"] = suite.comparability_key(
        RAND_4K, "fio", test["options"], "fio-2.0"
    )
    refused_by_both(api, doc, "/tests/0/comparability_key")


def test_a_tool_version_the_raw_output_does_not_say_is_refused(api, fio):
    doc = make_bundle(fio, tests=(RAND_4K,))
    test = doc["tests"][0]
    written_by = test["tool_version"]
    assert written_by.startswith("fio-3")
    # Sent as fio 2: its key would say fio2, and never meet fio 3's results.
    test["tool_version"] = "fio-2.21"
    test["comparability_key"] = suite.comparability_key(
        RAND_4K, "fio", test["options"], "fio-2.21"
    )
    message = refused_by_both(api, doc, "/tests/0/tool_version")
    assert f"'fio-2.21', but the raw output was written by {written_by}" in message


def test_honest_bundles_are_still_accepted(api, fio):
    for tests in ((RAND_4K, SEQ_1M), ("dd-write-1m-fdatasync",)):
        doc = make_bundle(fio, tests=tests)
        assert not agent_bundle.validate(doc)
        response = api.post(URL, doc, format="json")
        assert response.status_code == 202, response.content[:2000]


@pytest.mark.parametrize("name", ["full-none", "full-writeback"])
def test_the_real_sample_bundles_are_still_accepted(api, name):
    with gzip.open(SAMPLES / "bundles" / f"{name}.json.gz") as f:
        doc = json.load(f)
    assert not agent_bundle.validate(copy.deepcopy(doc))
    response = api.post(URL, doc, format="json")
    assert response.status_code == 202, response.content[:2000]
