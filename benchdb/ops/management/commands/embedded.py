"""``manage.py embedded status|stop``: the embedded PostgreSQL's lifecycle."""

from django.core.management.base import BaseCommand, CommandError

from benchdb import embedded


class Command(BaseCommand):
    help = "Show or stop the embedded PostgreSQL (used when DATABASE_URL is unset)."

    def add_arguments(self, parser):
        parser.add_argument("action", choices=["status", "stop"])

    def handle(self, *args, action: str, **kw):
        pgdata = embedded.var_dir() / "pgdata"
        if not (pgdata / "PG_VERSION").exists():
            raise CommandError(f"no embedded database under {pgdata}")
        server = embedded.postgres_server()
        if action == "status":
            self.stdout.write(f"running, pid {server.get_pid()}, data in {pgdata}")
        else:
            server.cleanup_mode = "stop"
            server.cleanup()
            self.stdout.write("stopped")
