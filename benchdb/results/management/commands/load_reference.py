"""``manage.py load_reference``: load the published reference runs (idempotent)."""

from django.core.management.base import BaseCommand

from benchdb.results import reference


class Command(BaseCommand):
    help = "Load the measurements published in the project's source documents."

    def handle(self, *args, **options):
        created, present = reference.load()
        self.stdout.write(
            f"reference data: {created} run(s) loaded, {present} already present"
        )
