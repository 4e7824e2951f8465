"""What a run's owner does to it, defined once for the API and the pages:
edit its title, notes, visibility or tags, delete it, claim it.

Who may do it is the caller's check (``api.permissions.is_owner``, the
pages' ``web.owner.owned_run``); an edit is checked by the API's
``RunUpdateSerializer`` on both (the upload's tag and text rules), so an
edit the API refuses is refused by the page with the same message.
"""

from __future__ import annotations

from django.db import transaction

from benchdb.results import ingest, refresh
from benchdb.results.models import Run


def edit_run(run: Run, changes: dict) -> Run:
    """Store an owner's checked ``changes`` (title, notes, visibility, tags) in one
    transaction.  New tags replace the old ones (``ingest.retag``: columns,
    hardware and plausibility follow); a tag whose value changed is no
    longer "read from the host" (``tag_sources``) but typed by a person."""
    changes = dict(changes)
    tags = changes.pop("tags", None)
    visibility_only = set(changes) <= {"visibility"}
    listed = run.is_listed()
    with transaction.atomic():
        for field, value in changes.items():
            setattr(run, field, value)
        if tags is not None:
            old = run.tags or {}
            run.tag_sources = {
                key: source
                for key, source in (run.tag_sources or {}).items()
                if key in tags and tags[key] == old.get(key)
            }
        run.save()
        if tags is not None:
            ingest.retag(run, tags)
        # Its title (free-text search), visibility or tags may have taken a
        # listed run out of a population; a new title or tags may have moved
        # it between the populations of run filters.
        refresh.announce(
            removal=listed, run=run.pk, moved=tags is not None or not visibility_only
        )
    return run


def delete_run(run: Run) -> None:
    """Delete the run with its results and raw outputs; saved comparisons
    and guests that named it say it is gone (``reads.saved_comparison``)."""
    listed, pk = run.is_listed(), run.pk
    with transaction.atomic():
        run.delete()
        refresh.announce(removal=listed, run=pk)


def claim_run(run: Run, user, key: str) -> bool:
    """Move an anonymous run into ``user``'s account if ``key`` is its owner
    key (which then stops working); False if it is not."""
    if not key or not run.check_owner_key(key):
        return False
    run.claim(user)
    return True
