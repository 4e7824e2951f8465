"""``manage.py store_overheads``: store the overheads of guest results that
have none (results stored before migration 0014) or whose stored one was
computed by another version of the formula (``overheads.OVERHEAD_VERSION``:
run it after a deploy that changed it), batch by batch."""

import time

from django.core.management.base import BaseCommand, CommandError
from django.db import transaction
from django.db.models import BigIntegerField, Exists, OuterRef, Q
from django.db.models.fields.json import KT
from django.db.models.functions import Cast

from benchdb.results import overheads
from benchdb.results.models import Result, Run


class Command(BaseCommand):
    help = (
        "Compute and store each guest result's overhead against its baseline "
        "(overheads.store_overheads) where none is stored or it was computed "
        "against another baseline or by another version of the formula; --all "
        "recomputes every one.  Comparisons "
        "and run pages compute a missing one on each request, so this only "
        "makes them faster, and it can run while benchdb serves."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--batch", type=int, default=500, help="guest runs per transaction"
        )
        parser.add_argument(
            "--all", action="store_true", help="recompute the stored ones too"
        )

    def handle(self, *args, batch: int, all: bool, **options):
        if batch < 1:
            raise CommandError("--batch must be at least 1")
        runs = Run.objects.filter(role="guest", baseline__isnull=False)
        if not all:
            # A result with no overhead, or one computed against another run
            # or by another formula.
            against = Cast(KT("overhead__baseline"), BigIntegerField())
            runs = runs.filter(
                Exists(
                    Result.objects.filter(run=OuterRef("pk"))
                    .annotate(against=against)
                    .filter(
                        Q(against__isnull=True)
                        | ~Q(against=OuterRef("baseline_id"))
                        | ~Q(overhead_version=overheads.OVERHEAD_VERSION)
                    )
                )
            )
        ids = list(runs.order_by("pk").values_list("pk", flat=True))
        start, stored = time.monotonic(), 0
        for at in range(0, len(ids), batch):
            with transaction.atomic():
                stored += overheads.store_overheads(ids[at : at + batch])
        self.stdout.write(
            f"overheads: {stored} result(s) of {len(ids)} guest run(s) stored "
            f"in {time.monotonic() - start:.1f} s"
        )
