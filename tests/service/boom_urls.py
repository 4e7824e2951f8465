"""benchdb's URLs and one view that fails, for the 500 page's tests."""

from django.urls import path

from benchdb.urls import urlpatterns as benchdb_urls


def boom(request):
    raise RuntimeError("a bug, for the test of the 500 page")


urlpatterns = [path("boom/", boom), *benchdb_urls]
