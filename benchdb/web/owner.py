"""The owner's pages: "My runs", a run's edit, visibility, delete and claim,
and the API tokens.

Every action is the API's own (``results.owning``, checked by the API's
``RunUpdateSerializer``): the pages are forms over the same functions, so a
run edited here is the run the API would have stored.  The owner of a run is
the signed-in account it belongs to, or this browser when its session holds
the run's owner key (``views.SESSION_OWNER_KEYS``: the address the agent
prints for an anonymous upload), as ``api.permissions.is_owner`` with
X-Owner-Key.  Anyone else gets 404, never a hint that the run exists.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse

from benchdb.api.serializers import RunUpdateSerializer
from benchdb.results import owning, reads
from benchdb.results.models import ApiToken, Run
from benchdb.results.vocab import Visibility
from benchdb_agent import contract, vocab

# Owner keys this browser opened runs with, by run id (views._remember_owner_key).
SESSION_OWNER_KEYS = "owner_keys"
MY_RUNS_PAGE = 50
# A tags box longer than this is not a run's tags (at most a few dozen short
# values): refused before it is parsed.
MAX_TAGS_TEXT = 20_000


def session_key(request, pk: int) -> str:
    return request.session.get(SESSION_OWNER_KEYS, {}).get(str(pk), "")


def owns(request, run: Run) -> bool:
    """Whether this browser may change ``run``: its signed-in owner, or the
    holder of its owner key in the session (staff moderate, they do not own)."""
    user = request.user
    if user.is_authenticated and run.owner_id == user.pk:
        return True
    key = session_key(request, run.pk)
    return bool(key) and run.check_owner_key(key)


def controls(request, run: Run) -> dict | None:
    """What the run page's owner bar needs (``_owner_bar.html``), or None
    when this browser does not own the run."""
    if not owns(request, run):
        return None
    return {"visibilities": Visibility.choices}


def owned_run(request, pk: int) -> Run:
    """The run ``pk`` if this browser owns it (``owns``), else Http404."""
    run = Run.objects.filter(pk=pk).first()
    if run is None or not owns(request, run):
        raise Http404("no such run of yours")
    return run


def _back(request, run: Run | None = None, default: str = "my-runs") -> str:
    """Where a form sends the owner back (``next``: a page's name, never an
    address from the request): the run's page or edit page, My runs,
    /submit/ or the tokens page."""
    where = request.POST.get("next", "")
    if run is not None and where in ("run", "edit"):
        return (
            run.get_absolute_url()
            if where == "run"
            else reverse("run-edit", args=[run.pk])
        )
    if where in ("my-runs", "submit", "tokens"):
        return reverse(where)
    if run is not None and not request.user.is_authenticated:
        return run.get_absolute_url()
    return reverse(default)


# --- My runs ----------------------------------------------------------------------


def _unclaimed(request) -> list[Run]:
    """Anonymous runs this browser holds the owner key of (opened from the
    address the agent printed), not yet in an account: offered to claim."""
    keys = request.session.get(SESSION_OWNER_KEYS, {})
    ids = [int(pk) for pk in keys if pk.isascii() and pk.isdigit()]
    runs = Run.objects.filter(pk__in=ids, owner__isnull=True).order_by("-id")
    return [r for r in runs if r.check_owner_key(keys[str(r.pk)])]


@login_required
def my_runs(request):
    """The signed-in user's runs, every visibility (``reads.run_list(mine=
    True)``: uploaded with a token or signed in, and anonymous ones claimed
    with their owner key), newest first, each with its controls."""
    runs = reads.run_list(request.user, mine=True).defer(*reads.LIST_DEFERRED)
    page = Paginator(runs, MY_RUNS_PAGE).get_page(request.GET.get("page"))
    return render(
        request,
        "web/my_runs.html",
        {
            "page": page,
            "unclaimed": _unclaimed(request),
            "visibilities": Visibility.choices,
        },
    )


# --- One run's changes ------------------------------------------------------------


def _problems(errors, prefix: str = "") -> list[str]:
    """The serializer's errors as sentences ("tags: cache_mode: ...")."""
    out = []
    if isinstance(errors, dict):
        for field, value in errors.items():
            name = "" if field == "non_field_errors" else f"{prefix}{field}: "
            out += _problems(value, name)
    else:
        for message in errors:
            if isinstance(message, dict | list):
                out += _problems(message, prefix)
            else:
                out.append(f"{prefix}{message}")
    return out


def _check(run: Run, data: dict) -> tuple[dict, list[str]]:
    """``data`` checked as the API checks an edit (``RunUpdateSerializer``):
    the values to store, or the reasons it cannot be."""
    serializer = RunUpdateSerializer(run, data=data, partial=True)
    if serializer.is_valid():
        return dict(serializer.validated_data), []
    return {}, _problems(serializer.errors)


def parse_tags(text: str) -> tuple[dict, list[str]]:
    """The edit page's tags box, one ``key=value`` a line as the agent's
    ``--tag`` takes them: the tags, or what is wrong, by line."""
    if len(text) > MAX_TAGS_TEXT:
        return {}, [f"tags: at most {MAX_TAGS_TEXT:,} characters"]
    tags, problems = {}, []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line:
            continue
        key, sep, value = line.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not key:
            problems.append(
                f"tags, line {number}: expected key=value, e.g. cache_mode=none"
            )
        elif key in tags:
            problems.append(f"tags, line {number}: {key} is given twice")
        else:
            tags[key] = value
    return tags, problems


def tags_text(tags: dict) -> str:
    return "".join(f"{k}={v}\n" for k, v in sorted((tags or {}).items()))


def _edit_context(run: Run, typed: dict | None = None, **extra) -> dict:
    """The edit form's context: the run's values, or what was typed."""
    values = {f: getattr(run, f) for f in ("title", "notes", "visibility")}
    return {
        "run": run,
        "values": {**values, **(typed or {})},
        "visibilities": Visibility.choices,
        "known_tags": sorted(vocab.TAG_VOCABULARIES),
        "title_max": Run._meta.get_field("title").max_length,
        "notes_max": contract.MAX_STRING,
        **extra,
    }


def run_edit(request, pk: int):
    """A run's title, notes, visibility and tags in one form (GET), stored
    with the API's edit (POST); 400 with the reasons and what was typed."""
    run = owned_run(request, pk)
    if request.method != "POST":
        return render(
            request,
            "web/run_edit.html",
            _edit_context(run, tags_text=tags_text(run.tags)),
        )
    typed = request.POST.get("tags", "")
    tags, problems = parse_tags(typed)
    data = {
        "title": request.POST.get("title", ""),
        "notes": request.POST.get("notes", ""),
        "visibility": request.POST.get("visibility", run.visibility),
        "tags": tags,
    }
    changes, refused = _check(run, data)
    problems += refused
    if problems:
        context = _edit_context(run, tags_text=typed, problems=problems, typed=data)
        return render(request, "web/run_edit.html", context, status=400)
    owning.edit_run(run, changes)
    messages.success(request, f"Run {run.pk} saved.")
    return redirect(_back(request, run))


def run_visibility(request, pk: int):
    """Change only the visibility (My runs' and the run page's control); its
    address opened (GET) shows the edit page rather than a blank 405."""
    run = owned_run(request, pk)
    if request.method != "POST":
        return redirect("run-edit", pk=run.pk)
    changes, problems = _check(run, {"visibility": request.POST.get("visibility")})
    if problems:
        return render(
            request,
            "web/owner_error.html",
            {"run": run, "problems": problems},
            status=400,
        )
    owning.edit_run(run, changes)
    messages.success(
        request, f"Run {run.pk} is now {run.get_visibility_display().lower()}."
    )
    return redirect(_back(request, run))


def run_delete(request, pk: int):
    """Ask first (GET: what will be deleted), delete on the confirmation's POST."""
    run = owned_run(request, pk)
    if request.method != "POST":
        return render(request, "web/run_delete.html", {"run": run})
    name = str(run)
    owning.delete_run(run)
    keys = dict(request.session.get(SESSION_OWNER_KEYS, {}))
    if keys.pop(str(pk), None) is not None:
        request.session[SESSION_OWNER_KEYS] = keys
    messages.success(request, f"Deleted {name}.")
    return redirect("my-runs" if request.user.is_authenticated else "home")


@login_required
def run_claim(request):
    """Claim an anonymous run into the account: by the owner key this browser
    holds for it, or by the run's number and the key the agent printed (a
    GET: My runs, where the form is)."""
    if request.method != "POST":
        return redirect("my-runs")
    raw = (request.POST.get("run") or "").strip().rstrip("/").rsplit("/", 1)[-1]
    if not raw.isascii() or not raw.isdigit() or len(raw) > 18:
        messages.error(request, "Give the run's number (e.g. 42) or its address.")
        return redirect("my-runs")
    pk = int(raw)
    key = (request.POST.get("key") or "").strip()[:200] or session_key(request, pk)
    run = Run.objects.filter(pk=pk, owner__isnull=True).first()
    if run is None or not owning.claim_run(run, request.user, key):
        messages.error(
            request,
            f"Run {pk} cannot be claimed with that owner key: check the number "
            "and the key the agent printed (bdo_…); a run already in an account "
            "cannot be claimed.",
        )
        return redirect("my-runs")
    messages.success(request, f"Run {pk} is now in your account.")
    return redirect("my-runs")


# --- API tokens -------------------------------------------------------------------


def agent_urls(request) -> dict:
    """The server and the agent's address, for the commands the pages show."""
    return {
        "server": request.build_absolute_uri("/").rstrip("/"),
        "agent_url": request.build_absolute_uri(reverse("agent-download")),
    }


def token_context(request) -> dict:
    """The token list and a token created on the previous request (shown once,
    then forgotten), for the tokens page and /submit/."""
    if not request.user.is_authenticated:
        return {}
    return {
        "tokens": request.user.api_tokens.filter(revoked__isnull=True),
        "new_token": request.session.pop("new_token", None),
    }


def tokens(request):
    """GET: the account's tokens, a new one with the commands that use it;
    POST: create one (then back to where it was asked for)."""
    if not request.user.is_authenticated:
        return redirect(f"{reverse('login')}?next={reverse('tokens')}")
    if request.method == "POST":
        return _token_create(request)
    return render(
        request,
        "web/tokens.html",
        {**agent_urls(request), **token_context(request)},
    )


def _token_create(request):
    name = (request.POST.get("name") or "").strip()
    problem = contract.text_problem(name)
    if not name or problem or len(name) > ApiToken._meta.get_field("name").max_length:
        messages.error(
            request,
            f"The token's name {problem}."
            if name and problem
            else "Give the token a name of at most 100 characters, e.g. the "
            "host it runs on.",
        )
        return redirect(_back(request, default="tokens"))
    _token, secret = ApiToken.issue(request.user, name)
    # Shown once, on the next page view, then forgotten.
    request.session["new_token"] = secret
    return redirect(_back(request, default="tokens"))


@login_required
def token_revoke(request, pk: int):
    token = get_object_or_404(ApiToken, pk=pk, user=request.user)
    if request.method != "POST":
        return redirect("tokens")  # the page with the Revoke buttons
    token.revoke()
    messages.success(request, f"Token {token.name} revoked.")
    return redirect(_back(request, default="tokens"))
