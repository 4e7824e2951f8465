"""A cache-mode sweep as one comparison.

``benchdb-agent vm --cache-modes ...`` measures one VM disk in several cache
modes; its guest runs and their host baseline share a ``sweep_id``.  The
sweep's address opens the ordinary compare page on those runs, the host
baseline as the reference, so a sweep is one shareable link.
"""

from __future__ import annotations

from urllib.parse import urlencode

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse

from benchdb.results.models import Role, Run


def sweep(request: HttpRequest, sweep_id: str) -> HttpResponse:
    runs = list(
        Run.objects.readable_by(request.user)
        .filter(sweep_id=sweep_id)
        .order_by("role", "created", "id")
        .values_list("pk", "role")
    )
    if not runs:
        raise Http404("no runs of this sweep that you may see")
    # The host baseline first and as the reference; guests in sweep order.
    hosts = [pk for pk, role in runs if role == Role.HOST]
    guests = [pk for pk, role in runs if role != Role.HOST]
    query = [("runs", ",".join(str(pk) for pk in hosts[:1] + guests))]
    if hosts:
        query.append(("ref", str(hosts[0])))
    return redirect(reverse("compare") + "?" + urlencode(query))
