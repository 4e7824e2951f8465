"""The cache-mode report ranks the modes across systems: a critical-difference
diagram (inline SVG) with its table, the probabilities of practical
equivalence, what was left out, and "not enough systems yet" with how many
more below the minimum.  The community is tests/results/
test_population_across.py's (known ranking: writeback, none = writethrough,
directsync; nobody measured unsafe)."""

from __future__ import annotations

import re

import pytest

from benchdb.results import population
from benchdb.web import present
from tests.results.test_population_across import MODES, TEST, community  # noqa: F401

pytestmark = pytest.mark.django_db


def text(page: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page))


def test_the_report_draws_the_ranking_and_its_table(client, community):  # noqa: F811
    page = client.get(f"/reports/cache-modes/?workload={TEST}").content.decode()
    assert 'id="cd-svg"' in page
    ranking = population.rank_settings("cache_mode", MODES, {"role": "guest"}, TEST)
    for name, rank in ranking["average_ranks"].items():
        assert f'data-mode="{name}">{name} {rank:.2f}</text>' in page
    words = text(page)
    assert "Over the 12 systems that measured every mode with data (48 runs)" in words
    # writeback told apart from directsync in the table, none from nobody
    # but directsync or writeback.
    row = re.search(r'<tr data-mode="writeback">(.*?)</tr>', page, re.S).group(1)
    assert "directsync" in row
    assert page.index('<tr data-mode="writeback">') < page.index(
        '<tr data-mode="directsync">'
    )
    # A bar joins none and writethrough (they cannot be told apart).
    assert re.search(r"<title>[^<]*none[^<]*writethrough[^<]*: not told apart", page)
    eq = re.search(r'id="equivalence-table">(.*?)</table>', page, re.S).group(1)
    pair = re.search(r"<td>none</td><td>writethrough</td>(.*?)</tr>", eq, re.S).group(1)
    assert 'class="verdict-equivalent"' in pair
    assert "No data: unsafe." in words
    assert "2 systems (2 runs) left out for not measuring every mode" in words
    assert "1 run without a hardware description" in words


def test_too_few_systems_say_how_many_more_on_the_page(client, community):  # noqa: F811
    # Only one system of the community is a SATA HDD: not enough.
    from benchdb.results.models import Hardware

    Hardware.objects.filter(fingerprint="fp-0").update(disk_type="hdd")
    page = client.get(
        f"/reports/cache-modes/?workload={TEST}&disk_type=hdd"
    ).content.decode()
    assert 'id="cd-svg"' not in page
    assert (
        "Not enough systems yet: 1 system measured all of them, at least 6 needed "
        "(5 more)." in text(page)
    )


def test_the_diagram_puts_the_better_half_left():
    ranking = {
        "average_ranks": {"a": 1.2, "b": 2.1, "c": 2.7, "d": 4.0},
        "critical_difference": 1.0,
        "groups": [["a", "b"], ["b", "c"]],
    }
    cd = present.cd_diagram(ranking)
    anchors = {s["name"]: s["anchor"] for s in cd["settings"]}
    assert anchors == {"a": "end", "b": "end", "c": "start", "d": "start"}
    xs = {s["name"]: s["x"] for s in cd["settings"]}
    assert xs["a"] < xs["b"] < xs["c"] < xs["d"] == present.CD_AXIS[1]
    # The CD scale is CD ranks long on the same axis.
    per_rank = (present.CD_AXIS[1] - present.CD_AXIS[0]) / 3
    assert cd["cd"]["x2"] - cd["cd"]["x1"] == pytest.approx(per_rank, abs=0.1)
    assert [b["names"] for b in cd["bars"]] == [["a", "b"], ["b", "c"]]
    assert present.cd_diagram({"average_ranks": None}) is None


def test_the_report_has_an_efficiency_column(client, community):  # noqa: F811
    from benchdb.results.models import Measurement, Result

    # Two writeback runs measured on the host: 100 and 300 µs of QEMU CPU per
    # I/O (1 s and 3 s over 10,000 I/Os); nothing else measured it.
    results = Result.objects.filter(run__cache_mode="writeback").order_by("id")[:2]
    for res, cpu in zip(results, (1.0, 3.0), strict=True):
        Measurement.objects.create(
            result=res, repeat=0, direction="read", iops=1000.0, runtime_s=10.0
        )
        res.run.environment = {"host_cpu": {"user_s": cpu / 2, "system_s": cpu / 2}}
        res.run.save(update_fields=["environment"])
    page = client.get(f"/reports/cache-modes/?workload={TEST}").content.decode()
    cells = dict(
        re.findall(
            r'<tr class="[^"]*" data-mode="(\w+)">.*?'
            r'<td class="host-cpu"[^>]*>(.*?)</td>',
            page,
            re.S,
        )
    )
    assert text(cells["writeback"]).strip() == "200.0 µs (median of 2 runs)"
    assert text(cells["none"]).strip() == "not measured"
