from django.apps import AppConfig


class ApiConfig(AppConfig):
    name = "benchdb.api"

    def ready(self):
        # Connects the sign-in failure counter (``user_login_failed``).
        from benchdb.api import throttling  # noqa: F401
