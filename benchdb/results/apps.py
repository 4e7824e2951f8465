from django.apps import AppConfig


class ResultsConfig(AppConfig):
    name = "benchdb.results"
    verbose_name = "Benchmark results"
