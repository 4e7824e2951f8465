"""The public dump after a run leaves the public set.

A hide, a change of visibility and a delete take the run out of what
``/api/v1/dump/`` serves at once (the latest dump filtered as it is served),
out of the files within minutes (``refresh_dump``, run by beat), and out of
every timestamped dump kept on disk (pruned).
"""

from __future__ import annotations

import csv
import gzip
import io
import json

import pytest
from django.conf import settings as django_settings

from benchdb.celery import app
from benchdb.results.ingest import store_bundle
from benchdb.results.models import Run
from benchdb.results.tasks import dump_is_current, public_dump, refresh_dump
from tests.api.conftest import token_client
from tests.api.factories import make_bundle

pytestmark = pytest.mark.django_db


@pytest.fixture
def dumps(tmp_path, settings):
    settings.PUBLIC_DUMP_DIR = str(tmp_path)
    return tmp_path


@pytest.fixture
def three(fio, alice):
    """A public host, its public guest and another public run of alice's."""
    host = store_bundle(make_bundle(fio, role="host", pair_id="dump"), owner=alice)
    guest = store_bundle(
        make_bundle(fio, role="guest", pair_id="dump", speed="slow"), owner=alice
    )
    guest.refresh_from_db()
    assert guest.baseline_id == host.pk
    other = store_bundle(make_bundle(fio), owner=alice)
    return host, guest, other


def served(api, kind: str) -> list[dict]:
    """The rows ``/api/v1/dump/`` serves, as dicts with ``run_id`` and
    ``baseline_id`` (int or None)."""
    response = api.get(f"/api/v1/dump/?kind={kind}")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/gzip"
    assert response["Cache-Control"] == "public, max-age=60"
    text = gzip.decompress(b"".join(response.streaming_content)).decode()
    if kind == "jsonl":
        return [json.loads(line) for line in text.splitlines()]
    return [
        {**row, "run_id": int(row["run_id"]), "baseline_id": _int(row["baseline_id"])}
        for row in csv.DictReader(io.StringIO(text, newline=""))
    ]


def _int(value: str) -> int | None:
    return int(value) if value else None


def on_disk(folder, pattern: str) -> set[int]:
    """Run ids in every CSV dump matching ``pattern``."""
    ids = set()
    for path in folder.glob(pattern):
        with gzip.open(path, "rt", newline="") as f:
            ids |= {int(r["run_id"]) for r in csv.DictReader(f)}
    return ids


def leave(change: str, run: Run, owner, staff) -> None:
    """Take ``run`` out of the public set through the API, as people do."""
    if change == "hide":
        response = token_client(staff).post(
            f"/api/v1/runs/{run.pk}/moderate/",
            {"action": "hide", "reason": "spam"},
            format="json",
        )
        assert response.status_code == 200
    elif change == "delete":
        response = token_client(owner).delete(f"/api/v1/runs/{run.pk}/")
        assert response.status_code == 204
    else:
        response = token_client(owner).patch(
            f"/api/v1/runs/{run.pk}/", {"visibility": change}, format="json"
        )
        assert response.status_code == 200


@pytest.mark.parametrize("change", ["hide", "private", "unlisted", "delete"])
def test_a_run_that_leaves_the_public_set_leaves_the_dump(
    api, dumps, three, alice, staff, change
):
    host, guest, other = three
    first = public_dump()
    assert on_disk(dumps, "latest.csv.gz") == {host.pk, guest.pk, other.pk}
    assert dump_is_current()

    leave(change, host, alice, staff)

    # At once: the latest file still holds it, what is served does not.
    assert not dump_is_current()
    assert host.pk in on_disk(dumps, "latest.csv.gz")
    for kind in ("csv", "jsonl"):
        rows = served(api, kind)
        assert {r["run_id"] for r in rows} == {guest.pk, other.pk}, kind
        # Its guest's rows stay, without naming it as their baseline.
        assert {r["baseline_id"] for r in rows if r["run_id"] == guest.pk} == {None}
        assert len(rows) == 2
    # The JSON lines keep their statistics.
    assert served(api, "jsonl")[0]["stats"]["main_direction"] == "read"

    # Within minutes (beat runs refresh_dump every minute): written again,
    # and no dump kept on disk holds it.
    second = refresh_dump()
    assert second and second != first
    assert dump_is_current()
    assert on_disk(dumps, "*.csv.gz") == {guest.pk, other.pk}
    assert not list(dumps.glob(f"{first}.*"))
    assert {r["run_id"] for r in served(api, "csv")} == {guest.pk, other.pk}
    # Nothing left to do until the next change.
    assert refresh_dump() == ""


def test_an_upload_leaves_the_dump_current(api, dumps, three, fio):
    host, guest, other = three
    public_dump()
    store_bundle(make_bundle(fio))
    # New runs wait for the daily dump; nothing shown is wrong meanwhile.
    assert dump_is_current()
    assert refresh_dump() == ""
    assert {r["run_id"] for r in served(api, "csv")} == {host.pk, guest.pk, other.pk}


def test_timestamped_dumps_are_pruned_to_the_newest(dumps, three, settings):
    settings.PUBLIC_DUMP_KEEP = 2
    stems = [public_dump() for _ in range(4)]
    assert len(set(stems)) == 4
    kept = sorted(p.name for p in dumps.glob("benchdb-public-*"))
    assert kept == sorted(
        f"{stem}.{suffix}"
        for stem in stems[2:]
        for suffix in ("csv.gz", "jsonl.gz", "json")
    )
    # Keeping none still keeps the one latest.* was copied from.
    settings.PUBLIC_DUMP_KEEP = 0
    newest = public_dump()
    assert {p.name.split(".")[0] for p in dumps.glob("benchdb-public-*")} == {newest}
    # No temporary file is left behind.
    assert not list(dumps.glob(".*"))


def test_no_dump_yet_is_404_and_refresh_does_not_write_one(api, dumps, three):
    assert api.get("/api/v1/dump/").status_code == 404
    assert refresh_dump() == ""
    assert not list(dumps.iterdir())


def test_beat_checks_the_dump_every_minute():
    entry = django_settings.CELERY_BEAT_SCHEDULE["refresh-dump"]
    assert entry["schedule"] == 60
    assert entry["task"] in app.tasks


@pytest.mark.parametrize("stale", [False, True])
def test_a_client_that_accepts_gzip_gets_the_dump_file_as_it_is(
    api, dumps, three, staff, stale
):
    """The dump is a gzip file already: asked by a browser or ``curl
    --compressed`` (Accept-Encoding: gzip) it is sent as it is, not gzipped
    a second time (CPU spent for no byte saved, and a client that does not
    decode would save a gzip inside a gzip)."""
    host, guest, other = three
    public_dump()
    if stale:  # served filtered, as a stream, until the next dump
        leave("hide", other, other.owner, staff)
        assert not dump_is_current()
    response = api.get("/api/v1/dump/?kind=csv", HTTP_ACCEPT_ENCODING="gzip")
    assert response.status_code == 200
    assert not response.has_header("Content-Encoding")
    body = b"".join(response.streaming_content)
    text = gzip.decompress(body).decode()
    ids = {int(row["run_id"]) for row in csv.DictReader(io.StringIO(text))}
    assert ids == ({host.pk, guest.pk} if stale else {host.pk, guest.pk, other.pk})
