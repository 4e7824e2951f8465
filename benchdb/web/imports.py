"""/submit/'s import: results people already have (a CrystalDiskMark export,
fio JSON, DiskSpd XML, YABS...), uploaded or pasted, shown parsed before
anything is published, with the VM facets the file cannot say declared.

The bundle is the one ``benchdb-agent import`` builds (``benchdb_agent.
imports.build``), checked with the same contract as an API upload, and
stored the same way: persist the submission, enqueue its ingest on commit,
then a status page that links to the run once the worker has stored it.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import zlib

from django import forms
from django.conf import settings
from django.db import transaction
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render

from benchdb.api.throttling import client_address
from benchdb.api.validation import check_upload
from benchdb.results import ingest
from benchdb.results.models import Submission, hash_secret, new_secret
from benchdb.results.tasks import enqueue
from benchdb_agent import bundle, imports, parsers, vocab, workload

SESSION_KEY = "imported_submissions"


def _choices(facet: str) -> list:
    allowed = vocab.TAG_VOCABULARIES[facet]
    return [("", "not declared")] + list(allowed)


class ImportForm(forms.Form):
    """An upload or a paste, and what the file cannot say (the agent's
    closed vocabularies, ``vocab.TAG_VOCABULARIES``)."""

    upload = forms.FileField(required=False, label="File")
    paste = forms.CharField(
        required=False, widget=forms.Textarea(attrs={"rows": 8}), label="Or paste it"
    )
    data = forms.CharField(required=False, widget=forms.HiddenInput)
    name = forms.CharField(required=False, widget=forms.HiddenInput)
    role = forms.ChoiceField(choices=vocab.ROLE, initial="guest")
    pair_id = forms.RegexField(
        regex=r"^[A-Za-z0-9._-]{1,64}$",
        required=False,
        label="Pair id (shared with the host's upload)",
    )
    title = forms.CharField(required=False, max_length=200)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for facet in imports.DECLARED_FACETS:
            if vocab.TAG_VOCABULARIES[facet] is None:
                self.fields[facet] = forms.CharField(required=False, max_length=200)
            else:
                self.fields[facet] = forms.ChoiceField(
                    choices=_choices(facet), required=False
                )
            self.fields[facet].label = facet.replace("_", " ").capitalize()
        self.fields["virtio_win_version"] = forms.CharField(
            required=False,
            max_length=64,
            label="virtio-win driver version (Windows guests: viostor/vioscsi)",
        )

    def output(self) -> tuple[bytes, str]:
        """The file's bytes and name: the upload, the paste, or what the
        preview carried (gzip and base64, so the bytes are exactly the
        upload's)."""
        upload = self.cleaned_data.get("upload")
        if upload is not None:
            if upload.size > parsers.MAX_INPUT_BYTES:
                raise parsers.ParseError(
                    upload.name,
                    f"{upload.size} bytes is larger than {parsers.MAX_INPUT_BYTES} "
                    "bytes, the most one tool output may be",
                )
            return upload.read(), upload.name
        if self.cleaned_data.get("data"):
            try:
                packed = base64.b64decode(self.cleaned_data["data"], validate=True)
                inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
                data = inflater.decompress(packed, parsers.MAX_INPUT_BYTES + 1)
            except (binascii.Error, ValueError, zlib.error):
                raise parsers.ParseError("preview", "the form was altered") from None
            return data, self.cleaned_data.get("name") or "pasted text"
        paste = self.cleaned_data.get("paste") or ""
        if not paste.strip():
            raise parsers.ParseError("form", "choose a file or paste an output")
        return paste.encode("utf-8"), "pasted text"

    def tags(self) -> dict:
        tags = {}
        for facet in (*imports.DECLARED_FACETS, "virtio_win_version"):
            value = (self.cleaned_data.get(facet) or "").strip()
            if value:
                tags[facet] = value
        return tags


def _preview_rows(doc: dict) -> list[dict]:
    """Each test of the bundle with its main figure, as the run will show it."""
    rows = []
    for test in doc["tests"]:
        metric = workload.main_metric(test["test_id"]) or "iops"
        direction = test["direction"]
        values = []
        for repeat in test["repeats"]:
            records = [
                r
                for r in repeat["records"]
                if direction == "mixed" or r["direction"] == direction
            ]
            figures = [r.get(metric) for r in records if r.get(metric) is not None]
            if figures:
                summed = metric in ("iops", "bw_bytes")
                values.append(sum(figures) if summed else figures[0])
        rows.append(
            {
                "test_id": test["test_id"],
                "title": test["title"],
                "direction": direction,
                "metric": metric,
                "values": values,
                "suite": not test["test_id"].startswith("io-"),
                "approximate": test.get("approximate"),
            }
        )
    return rows


def import_results(request):
    """POST: preview (``action=preview``) or publish (``action=publish``)."""
    if request.method != "POST":
        return redirect("submit")
    form = ImportForm(request.POST, request.FILES)
    context = {"form": form}
    if not form.is_valid():
        return render(request, "web/import_preview.html", context, status=400)
    user = request.user if request.user.is_authenticated else None
    if user is None and not settings.ALLOW_ANONYMOUS_SUBMISSIONS:
        context["error"] = "Sign in to publish: anonymous uploads are disabled here."
        return render(request, "web/import_preview.html", context, status=403)
    try:
        data, name = form.output()
        text, parsed = imports.read_output(data, name)
    except parsers.ParseError as exc:
        context["error"] = str(exc)
        return render(request, "web/import_preview.html", context, status=400)
    tags = form.tags()
    problems = [
        f"{key}: {problem}"
        for key, value in tags.items()
        if (problem := bundle.check_tag(key, value))
    ]
    if problems:
        context["error"] = "; ".join(problems)
        return render(request, "web/import_preview.html", context, status=400)
    doc = imports.build(
        [(name, text, parsed)],
        role=form.cleaned_data["role"],
        tags=tags,
        pair_id=form.cleaned_data.get("pair_id") or None,
        title=form.cleaned_data.get("title") or None,
    )
    checked = check_upload(doc)
    if checked.errors:
        context["error"] = "; ".join(
            f"{e['pointer']}: {e['message']}" for e in checked.errors[:5]
        )
        return render(request, "web/import_preview.html", context, status=400)
    if request.POST.get("action") != "publish":
        context.update(
            {
                "parsed": parsed,
                "rows": _preview_rows(doc),
                "undeclared": imports.undeclared(tags),
                "tags": tags,
                # The previewed bytes themselves, gzip'd (a text export
                # shrinks about tenfold) to stay within the request limit.
                "carry": base64.b64encode(gzip.compress(data, mtime=0)).decode("ascii"),
                "name": name,
                "warning": doc["warnings"][0]["message"],
            }
        )
        return render(request, "web/import_preview.html", context)
    key = new_secret("bdo") if user is None else None
    with transaction.atomic():
        sub = Submission.objects.create(
            bundle_id=doc["bundle_id"],
            bundle=doc,
            parsed=ingest.parsed_of(checked),
            submitted_by=user,
            owner_key_hash=hash_secret(key) if key else "",
            remote_addr=client_address(request),
        )
        transaction.on_commit(lambda: enqueue(sub.pk))
    mine = request.session.get(SESSION_KEY, [])
    request.session[SESSION_KEY] = [*mine[-49:], sub.pk]
    if key:
        request.session[f"owner_key_{sub.pk}"] = key
    return redirect("import-status", pk=sub.pk)


def import_status(request, pk: int):
    """Where an imported upload is: queued, stored (with a link), or failed."""
    sub = get_object_or_404(Submission.objects.defer("bundle", "parsed"), pk=pk)
    own = sub.pk in request.session.get(SESSION_KEY, []) or (
        request.user.is_authenticated and sub.submitted_by_id == request.user.pk
    )
    if not own:
        raise Http404
    done = sub.status == Submission.Status.DONE and sub.run_id
    # Shown until the run is stored (the page refreshes while it waits), then
    # once more, with the run, and forgotten.
    key = f"owner_key_{sub.pk}"
    owner_key = request.session.pop(key, None) if done else request.session.get(key)
    context = {"sub": sub, "owner_key": owner_key, "done": done}
    return render(request, "web/import_status.html", context)
