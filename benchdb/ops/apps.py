from django.apps import AppConfig


class OpsConfig(AppConfig):
    name = "benchdb.ops"

    def ready(self) -> None:
        # Registers the deploy checks (manage.py check --deploy).
        from benchdb.ops import checks  # noqa: F401
