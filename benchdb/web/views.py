"""Server-rendered pages."""

from __future__ import annotations

from django.shortcuts import get_object_or_404, render

from benchdb.results.models import Comparison, Run


def home(request):
    runs = Run.objects.visible()
    context = {
        "run_count": runs.count(),
        "latest": runs.for_list()[:10],
    }
    return render(request, "web/home.html", context)


def run_detail(request, pk: int):
    run = get_object_or_404(Run.objects.readable_by(request.user), pk=pk)
    return render(request, "web/run_detail.html", {"run": run})


def comparison_share(request, slug: str):
    comparison = get_object_or_404(Comparison, slug=slug)
    return render(request, "web/comparison.html", {"comparison": comparison})
