"""The API under /api/: the v1 endpoints (namespace ``api``), schema and docs."""

from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView
from rest_framework.routers import DefaultRouter

from benchdb.api import population, views

router = DefaultRouter(trailing_slash=True)
router.register("submissions", views.SubmissionViewSet, basename="submission")
router.register("runs", views.RunViewSet, basename="run")
router.register("hardware", views.HardwareViewSet, basename="hardware")
router.register("comparisons", views.ComparisonViewSet, basename="comparison")
router.register("tokens", views.ApiTokenViewSet, basename="token")

v1 = [
    path("compare/", views.CompareView.as_view(), name="compare"),
    path("aggregates/", views.AggregatesView.as_view(), name="aggregates"),
    path("vocabularies/", views.VocabulariesView.as_view(), name="vocabularies"),
    path("dump/", views.DumpView.as_view(), name="dump"),
    path("population/", include(population.urlpatterns)),
    *router.urls,
]

urlpatterns = [
    path("v1/", include((v1, "api"))),
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    path(
        "docs/", SpectacularSwaggerSplitView.as_view(url_name="schema"), name="api-docs"
    ),
]
