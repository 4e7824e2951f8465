"""``manage.py create_api_token USERNAME [--name NAME]``: print a new token once.

Only the token's SHA-256 is stored, so this output is the only place the key
ever appears: the agent takes it with ``--token`` or ``BENCHDB_TOKEN``.
"""

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from benchdb.results.models import ApiToken


class Command(BaseCommand):
    help = "Create an API token for a user and print it (it is shown only once)."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument(
            "--name", default="command line", help="a label to tell tokens apart"
        )
        parser.add_argument(
            "--create-user",
            action="store_true",
            help="create the user (without a password) if it does not exist",
        )

    def handle(self, *args, username, name, create_user, **options):
        User = get_user_model()
        user = User.objects.filter(username=username).first()
        if user is None:
            if not create_user:
                raise CommandError(
                    f"no user {username!r}: create it first (manage.py "
                    "createsuperuser) or pass --create-user"
                )
            user = User.objects.create_user(username=username)
        if len(name) > 100:
            raise CommandError("--name: at most 100 characters")
        _token, key = ApiToken.issue(user, name)
        self.stdout.write(key)
