from django.apps import AppConfig


class WebConfig(AppConfig):
    name = "benchdb.web"
