"""Who sees which run, through every read, in the API and on the pages.

The matrix: anonymous / owner / other / staff × a host baseline that is
public / unlisted / private / hidden by the moderators, under a public guest
run of the same owner.
Every read that can show the baseline (its page and API detail, the guest's
page and API detail with overhead, lists, the overhead report, compare, a
saved comparison, a submission's status, the public dump, raw outputs) must
show it exactly to those ``Run.objects.visible_to`` lets open it, and lists
and reports only when it is listed (public).
"""

from __future__ import annotations

import csv
import gzip
import json
import re

import pytest
from django.http import QueryDict
from django.test import Client
from rest_framework.test import APIClient

from benchdb.results import compare as compare_mod
from benchdb.results import reads
from benchdb.results.ingest import store_bundle
from benchdb.results.models import Comparison, Run, Submission
from benchdb.results.tasks import public_dump
from benchdb.web import present
from tests.api.conftest import token_client
from tests.api.factories import make_bundle

pytestmark = pytest.mark.django_db

VISIBILITIES = ("public", "unlisted", "private")
# The visibilities and "hidden": a public run the moderators hid.
STATES = (*VISIBILITIES, "hidden")
WHO = ("anonymous", "owner", "other", "staff")
# who -> baseline states they may open
MAY_OPEN = {
    "anonymous": {"public", "unlisted"},
    "owner": {"public", "unlisted", "private", "hidden"},
    "other": {"public", "unlisted"},
    "staff": {"public", "unlisted", "private", "hidden"},
}


@pytest.fixture
def people(alice, bob, staff):
    return {"anonymous": None, "owner": alice, "other": bob, "staff": staff}


def clients_for(user):
    """(API client with a real token, page client with a session)."""
    if user is None:
        return APIClient(), Client()
    page = Client()
    page.force_login(user)
    return token_client(user), page


@pytest.fixture
def pair(fio, alice):
    def make(visibility: str) -> tuple[Run, Run]:
        """A guest and its host baseline of ``visibility`` (a state:
        "hidden" is a public host the moderators hid once paired)."""
        hidden = visibility == "hidden"
        visibility = "public" if hidden else visibility
        host_bundle = make_bundle(fio, role="host", pair_id="pair-1")
        host = store_bundle(host_bundle, owner=alice, visibility=visibility)
        Submission.objects.create(
            bundle_id=host_bundle["bundle_id"],
            bundle={},
            status=Submission.Status.DONE,
            run=host,
            submitted_by=alice,
            visibility=visibility,
        )
        guest = store_bundle(
            make_bundle(fio, role="guest", pair_id="pair-1", speed="slow"),
            owner=alice,
            visibility="public",
        )
        guest.refresh_from_db()
        assert guest.baseline_id == host.pk
        if hidden:
            host.moderate("hide", "numbers from a RAM disk")
        return guest, host

    return make


def run_link(pk: int) -> re.Pattern:
    return re.compile(rf'href="/runs/{pk}/"')


@pytest.mark.parametrize("who", WHO)
@pytest.mark.parametrize("visibility", STATES)
def test_every_read_shows_the_baseline_only_to_who_may_open_it(
    pair, people, who, visibility, tmp_path, settings
):
    guest, host = pair(visibility)
    user = people[who]
    api, page = clients_for(user)
    may_open = visibility in MAY_OPEN[who]
    listed = visibility == "public"
    # Asked for by id, a hidden run says it was hidden (410), others 404.
    refused = 410 if visibility == "hidden" else 404

    # The rule, as a filter and as a predicate, agree.
    assert Run.objects.visible_to(user).filter(pk=host.pk).exists() == may_open
    assert host.is_visible_to(user) == may_open
    assert Run.objects.listed().filter(pk=host.pk).exists() == listed

    # The baseline itself: API detail, page, raw output.
    detail = api.get(f"/api/v1/runs/{host.pk}/")
    assert detail.status_code == (200 if may_open else refused)
    assert page.get(f"/runs/{host.pk}/").status_code == (200 if may_open else refused)
    result = host.results.first()
    raw = page.get(f"/runs/{host.pk}/raw/{result.pk}/0/")
    assert raw.status_code == (200 if may_open else refused)

    # The guest's API detail: baseline id and overhead only if it may be opened.
    detail = api.get(f"/api/v1/runs/{guest.pk}/").json()
    assert detail["baseline"] == (host.pk if may_open else None)
    assert (detail["tests"][0]["overhead"] is not None) == may_open
    # The guest's page: link to the baseline and overhead only if so.
    response = page.get(f"/runs/{guest.pk}/")
    html = response.content.decode()
    assert bool(run_link(host.pk).search(html)) == may_open
    assert (response.context["rows"][0]["overhead"] is not None) == may_open

    # Lists: the baseline listed only when public; the guest's baseline id as
    # for the detail.
    listing = {r["id"]: r for r in api.get("/api/v1/runs/").json()["results"]}
    assert (host.pk in listing) == listed
    assert listing[guest.pk]["baseline"] == (host.pk if may_open else None)
    browse = page.get("/runs/").content.decode()
    assert bool(run_link(host.pk).search(browse)) == listed

    # The overhead report is a list: both runs must be listed.
    report = page.get("/reports/overhead/")
    assert bool(report.context["rows"]) == listed
    assert bool(run_link(host.pk).search(report.content.decode())) == listed

    # Compare, API and page.
    ids = f"{guest.pk},{host.pk}"
    assert api.get(f"/api/v1/compare/?runs={ids}").status_code == (
        200 if may_open else 400
    )
    assert page.get(f"/compare/?runs={ids}").status_code == (200 if may_open else 404)

    # A comparison the owner saved: the reader sees only what they may open.
    saved = reads.save_comparison([guest.pk, host.pk], host.pk, user=host.owner)
    body = api.get(f"/api/v1/comparisons/{saved.slug}/").json()
    assert body["run_ids"] == ([guest.pk, host.pk] if may_open else [guest.pk])
    assert body["reference_run_id"] == (host.pk if may_open else guest.pk)
    assert [r["id"] for r in body["comparison"]["runs"]] == body["run_ids"]
    share = page.get(f"/c/{saved.slug}")
    assert share.status_code == 200
    assert [r.pk for r in share.context["runs"]] == body["run_ids"]
    assert bool(run_link(host.pk).search(share.content.decode())) == may_open

    # A submission's status names the run only to who may open it.
    status = api.get(f"/api/v1/submissions/{host.uuid}/").json()
    assert status["run"] == (host.pk if may_open else None)
    assert (status["run_url"] is not None) == may_open

    # The public dump names the baseline only when it is listed.
    settings.PUBLIC_DUMP_DIR = str(tmp_path)
    public_dump()
    with gzip.open(tmp_path / "latest.csv.gz", "rt") as f:
        rows = {int(r["run_id"]): r for r in csv.DictReader(f)}
    assert (host.pk in rows) == listed
    assert rows[guest.pk]["baseline_id"] == (str(host.pk) if listed else "")


def test_the_owner_key_opens_a_private_anonymous_run_and_its_baseline(fio):
    from benchdb.results.models import hash_secret, new_secret

    key = new_secret("bdo")
    host = store_bundle(
        make_bundle(fio, role="host", pair_id="anon-pair"),
        owner_key_hash=hash_secret(key),
        visibility="private",
    )
    guest = store_bundle(
        make_bundle(fio, role="guest", pair_id="anon-pair", speed="slow"),
        owner_key_hash=hash_secret(key),
        visibility="public",
    )
    guest.refresh_from_db()
    assert guest.baseline_id == host.pk
    api = APIClient()
    assert api.get(f"/api/v1/runs/{guest.pk}/").json()["baseline"] is None
    with_key = api.get(f"/api/v1/runs/{guest.pk}/", HTTP_X_OWNER_KEY=key).json()
    assert with_key["baseline"] == host.pk
    assert host.is_visible_to(None, key)
    assert Run.objects.visible_to(None, key).filter(pk=host.pk).exists()
    assert not Run.objects.visible_to(None, "bdo_wrong").filter(pk=host.pk).exists()


def test_saved_comparisons_have_the_same_limits_in_the_api_and_on_the_page(fio, alice):
    runs = [store_bundle(make_bundle(fio), owner=alice) for _ in range(13)]
    ids = [r.pk for r in runs]
    api = token_client(alice)
    too_many = api.post("/api/v1/comparisons/", {"runs": ids}, format="json")
    assert too_many.status_code == 400
    assert too_many.json()["errors"][0]["pointer"].startswith("/runs")
    page = Client()
    page.force_login(alice)
    refused = page.post("/compare/save/", {"runs": ",".join(map(str, ids))})
    assert refused.status_code == 400
    assert Comparison.objects.count() == 0
    twelve = api.post("/api/v1/comparisons/", {"runs": ids[:12]}, format="json")
    assert twelve.status_code == 201
    assert page.get(f"/c/{twelve.json()['slug']}").status_code == 200
    assert api.get(f"/api/v1/compare/?runs={','.join(map(str, ids))}").status_code == (
        400
    )


@pytest.mark.parametrize("who", WHO)
@pytest.mark.parametrize("visibility", VISIBILITIES)
def test_aggregates_counts_and_similar_hold_listed_runs_only(
    fio, alice, people, who, visibility
):
    run = store_bundle(
        make_bundle(fio, environment=_env("Visibility CPU", "Visibility Disk")),
        owner=alice,
        visibility=visibility,
    )
    user = people[who]
    api, page = clients_for(user)
    listed = visibility == "public"
    may_open = visibility in MAY_OPEN[who]
    test_id = run.results.get().test_id

    # Aggregates and the hardware list: listed runs only, for everyone.
    agg = api.get(f"/api/v1/aggregates/?test_id={test_id}&metric=iops").json()
    assert agg["overall"]["count"] == (1 if listed else 0)
    hardware = api.get("/api/v1/hardware/").json()["results"]
    assert (run.hardware_id in {h["id"] for h in hardware}) == listed
    # Home and browse counts (reads.home_summary, reads.facet_counts).
    home = page.get("/")
    assert home.context["run_count"] == (1 if listed else 0)
    assert home.context["system_count"] == (1 if listed else 0)
    browse = page.get("/runs/")
    roles = {f["name"]: f for f in browse.context["facets"]}["role"]["options"]
    assert sum(o["n"] for o in roles) == (1 if listed else 0)
    # Similar systems: only for a run the reader may open.
    similar = api.get(f"/api/v1/runs/{run.pk}/similar/?test_id={test_id}")
    assert similar.status_code == (200 if may_open else 404)
    if may_open:
        # Ranked among the other runs (none here); counted when it is listed.
        body = similar.json()
        assert body["population"] == [] and body["ranked_among"] == 0
        assert body["distribution"]["count"] == (1 if listed else 0)


def _env(cpu: str, disk: str) -> dict:
    """An environment of its own, so the run's hardware row is its own."""
    return {
        "virtualization": {"type": "kvm", "evidence": []},
        "platform": {"value": "unknown", "hints": []},
        "cpu": {"model": cpu, "sockets": 1, "cores": 2, "threads": 2},
        "memory_bytes": 2147483648,
        "os": {"name": "Debian GNU/Linux 12 (bookworm)", "kernel": "6.1.0-test"},
        "target": {
            "path": "/mnt/test",
            "filesystem": "ext4",
            "device": "vdb",
            "disk_bus": "virtio-blk",
            "rotational": False,
            "model": disk,
        },
    }


@pytest.mark.parametrize("who", WHO)
@pytest.mark.parametrize("visibility", STATES)
def test_has_baseline_counts_only_a_baseline_the_reader_may_open(
    pair, people, who, visibility
):
    guest, host = pair(visibility)
    user = people[who]
    api, page = clients_for(user)
    may_open = visibility in MAY_OPEN[who]

    def api_ids(query: str) -> set[int]:
        response = api.get(f"/api/v1/runs/?{query}")
        assert response.status_code == 200, response.content
        return {r["id"] for r in response.json()["results"]}

    # The filter agrees with the baseline field the same reader is shown.
    assert (guest.pk in api_ids("has_baseline=true")) == may_open
    assert (guest.pk in api_ids("has_baseline=false")) == (not may_open)
    listed = {
        r["id"]: r["baseline"] for r in api.get("/api/v1/runs/").json()["results"]
    }
    assert (listed[guest.pk] is not None) == may_open
    for value, expected in (("true", may_open), ("false", not may_open)):
        html = page.get(f"/runs/?has_baseline={value}").content.decode()
        assert bool(run_link(guest.pk).search(html)) == expected
        assert (
            reads.browse({"has_baseline": value}, user).qs.filter(pk=guest.pk).exists()
            == expected
        )


@pytest.mark.parametrize("who", WHO)
@pytest.mark.parametrize("visibility", VISIBILITIES)
def test_a_hidden_run_has_one_answer_in_the_api_and_on_its_page(
    fio, alice, people, who, visibility
):
    run = store_bundle(make_bundle(fio), owner=alice, visibility=visibility)
    run.moderate("hide", "numbers from a RAM disk")
    user = people[who]
    api, page = clients_for(user)
    may_open = visibility in MAY_OPEN[who]
    sees_hidden = who in ("owner", "staff")
    expected = 404 if not may_open else (200 if sees_hidden else 410)

    detail = api.get(f"/api/v1/runs/{run.pk}/")
    html = page.get(f"/runs/{run.pk}/")
    raw = page.get(f"/runs/{run.pk}/raw/{run.results.get().pk}/0/")
    similar = api.get(
        f"/api/v1/runs/{run.pk}/similar/?test_id={run.results.get().test_id}"
    )
    assert detail.status_code == html.status_code == expected
    assert raw.status_code == similar.status_code == expected
    if expected == 410:
        # Both say why, the API as JSON.
        assert detail.json()["hidden_reason"] == "numbers from a RAM disk"
        assert detail.json()["errors"][0]["code"] == "hidden"
        assert "numbers from a RAM disk" in html.content.decode()
    if expected == 200:
        assert detail.json()["hidden_reason"] == "numbers from a RAM disk"
    # One rule, moderation included: as a filter and for a loaded row.
    opens = expected == 200
    assert Run.objects.visible_to(user).filter(pk=run.pk).exists() == opens
    assert run.is_visible_to(user) == opens
    assert not Run.objects.listed().filter(pk=run.pk).exists()


def test_the_owner_key_opens_a_hidden_anonymous_run(fio):
    from benchdb.results.models import hash_secret, new_secret

    key = new_secret("bdo")
    run = store_bundle(make_bundle(fio), owner_key_hash=hash_secret(key))
    run.moderate("hide", "spam")
    api = APIClient()
    assert api.get(f"/api/v1/runs/{run.pk}/").status_code == 410
    shown = api.get(f"/api/v1/runs/{run.pk}/", HTTP_X_OWNER_KEY=key)
    assert shown.status_code == 200
    assert shown.json()["hidden_reason"] == "spam"


@pytest.mark.parametrize("hide", ["private", "unlisted", "hidden"])
def test_a_guest_not_listed_does_not_show_through_its_host(fio, hide):
    """A public host whose only Xen guest is private (unlisted, hidden) is not
    listed or counted under Xen: that would tell that such a guest exists."""
    host = store_bundle(make_bundle(fio, role="host"))
    guest = store_bundle(make_bundle(fio, role="guest", speed="slow"))
    Run.objects.filter(pk=host.pk).update(platform="unknown")
    Run.objects.filter(pk=guest.pk).update(platform="xen", baseline=host)
    assert reads.browse(QueryDict("platform=xen")).qs.filter(pk=host.pk).exists()
    if hide == "hidden":
        Run.objects.filter(pk=guest.pk).update(hidden=True, hidden_reason="spam")
    else:
        Run.objects.filter(pk=guest.pk).update(visibility=hide)
    assert not reads.browse(QueryDict("platform=xen")).qs.filter(pk=host.pk).exists()
    platforms = {f["name"]: f for f in reads.facet_counts(QueryDict(""))}["platform"]
    assert {o["value"]: o["n"] for o in platforms["options"]}.get("xen", 0) == 0
    assert str(host.pk) not in {
        str(r["id"])
        for r in APIClient().get("/api/v1/runs/?platform=xen").json()["results"]
    }
    # Listed again, the guest brings its host under Xen.
    Run.objects.filter(pk=guest.pk).update(
        visibility="public", hidden=False, hidden_reason=""
    )
    assert reads.browse(QueryDict("platform=xen")).qs.filter(pk=host.pk).exists()


HIDE_REASON = "numbers from a RAM disk"


@pytest.mark.parametrize("who", WHO)
def test_a_hidden_run_is_shown_by_no_reader_but_to_its_owner_and_staff(
    pair, people, who, tmp_path, settings
):
    """The moderators hide a public host baseline (through the API, as staff
    do) after its figures were compared, kept in the comparison memo, saved
    in a share link, exported and counted in stored answers.  From the
    commit on, every reader shows it to its owner and staff only."""
    settings.BENCHDB_COMPARISON_MEMO = 100_000
    compare_mod._MEMO.clear()
    guest, host = pair("public")
    Run.objects.filter(pk=host.pk).update(title="The hidden host")
    test_id = host.results.get().test_id
    user = people[who]
    api, page = clients_for(user)
    sees = who in ("owner", "staff")
    both = f"{guest.pk},{host.pk}"
    aggregates = f"/api/v1/aggregates/?test_id={test_id}&metric=iops"
    population = f"/api/v1/population/?test_id={test_id}&metric=iops"

    # Before: everyone sees it everywhere; the memo and stored answers hold it.
    anyone = APIClient()
    before = anyone.get(f"/api/v1/compare/?runs={host.pk},{guest.pk}")
    assert before.status_code == 200
    assert len(compare_mod._MEMO) == 1
    slug = present.group_slug(before.json()["tests"][0])
    assert anyone.get(aggregates).json()["overall"]["count"] == 2
    assert anyone.get(population).json()["results"]["runs"] == 2
    saved = reads.save_comparison([guest.pk, host.pk], host.pk, user=host.owner)

    moderated = token_client(people["staff"]).post(
        f"/api/v1/runs/{host.pk}/moderate/",
        {"action": "hide", "reason": HIDE_REASON},
        format="json",
    )
    assert moderated.status_code == 200

    # Comparisons of it, every format, API and pages: 400 / 404 to others
    # (the memo holds its figures, and never serves them to them).
    for ids in (str(host.pk), both, f"{host.pk},{guest.pk}"):
        response = api.get(f"/api/v1/compare/?runs={ids}")
        assert response.status_code == (200 if sees else 400), ids
        if sees:
            assert host.pk in {r["id"] for r in response.json()["runs"]}
        else:
            assert response.json()["errors"][0]["pointer"] == "/runs"
        csv_api = api.get(f"/api/v1/compare/?runs={ids}&format=csv")
        assert csv_api.status_code == (200 if sees else 400), ids
        for url in ("/compare/", "/compare/csv/", "/compare/markdown/"):
            shown = page.get(f"{url}?runs={ids}")
            assert shown.status_code == (200 if sees else 404), (url, ids)
            if url == "/compare/":
                assert ("The hidden host" in shown.content.decode()) == sees
        table = page.get(f"/compare/table/?runs={ids}&group={slug}")
        assert table.status_code == (200 if sees else 404), ids
    # Nor saved into a new share link.
    refused = api.post("/api/v1/comparisons/", {"runs": [host.pk]}, format="json")
    assert refused.status_code == (201 if sees else 400)
    assert page.post("/compare/save/", {"runs": both}).status_code == (
        302 if sees else 404
    )

    # The share link saved before: the hidden run drops out, and it says so.
    body = api.get(f"/api/v1/comparisons/{saved.slug}/").json()
    assert body["run_ids"] == ([guest.pk, host.pk] if sees else [guest.pk])
    assert body["reference_run_id"] == (host.pk if sees else guest.pk)
    assert [r["id"] for r in body["comparison"]["runs"]] == body["run_ids"]
    assert body["unavailable_runs"] == (0 if sees else 1)
    share = page.get(f"/c/{saved.slug}")
    assert share.status_code == 200
    assert [r.pk for r in share.context["runs"]] == body["run_ids"]
    html = share.content.decode()
    assert bool(run_link(host.pk).search(html)) == sees
    assert ("One run of this comparison is no longer available" in html) != sees

    # Under its guest (page and detail): no baseline, no overhead, to others.
    detail = api.get(f"/api/v1/runs/{guest.pk}/").json()
    assert detail["baseline"] == (host.pk if sees else None)
    assert (detail["tests"][0]["overhead"] is not None) == sees
    guest_page = page.get(f"/runs/{guest.pk}/")
    assert bool(run_link(host.pk).search(guest_page.content.decode())) == sees
    assert (guest_page.context["rows"][0]["overhead"] is not None) == sees
    # The submission's status names it only to them.
    status = api.get(f"/api/v1/submissions/{host.uuid}/").json()
    assert status["run"] == (host.pk if sees else None)

    # Lists, exports, aggregates, stored answers, similar systems, the dump:
    # listed runs only, for everyone (its owner finds it with mine=true).
    listing = {r["id"] for r in api.get("/api/v1/runs/").json()["results"]}
    assert host.pk not in listing and guest.pk in listing
    assert not run_link(host.pk).search(page.get("/runs/").content.decode())
    for url in ("/api/v1/runs/export/?format=csv", "/runs/export/"):
        text = b"".join(page.get(url).streaming_content).decode()
        rows = list(csv.DictReader(text.splitlines()))
        assert {int(r["run_id"]) for r in rows} == {guest.pk}, url
        assert {r["baseline_id"] for r in rows} == {""}, url

    def exported(query: str) -> set[int]:
        response = api.get(f"/api/v1/runs/export/?format=json{query}")
        body = json.loads(b"".join(response.streaming_content))
        return {r["run_id"] for r in body["rows"]}

    assert exported("") == {guest.pk}
    if who == "owner":
        assert exported("&mine=true") == {guest.pk, host.pk}
    assert api.get(aggregates).json()["overall"]["count"] == 1
    assert api.get(population).json()["results"]["runs"] == 1
    similar = api.get(f"/api/v1/runs/{guest.pk}/similar/?test_id={test_id}").json()
    assert similar["distribution"]["count"] == 1  # itself, ranked among none
    assert similar["ranked_among"] == 0
    settings.PUBLIC_DUMP_DIR = str(tmp_path)
    public_dump()
    with gzip.open(tmp_path / "latest.csv.gz", "rt") as f:
        dumped = {int(r["run_id"]): r for r in csv.DictReader(f)}
    assert set(dumped) == {guest.pk}
    assert dumped[guest.pk]["baseline_id"] == ""
