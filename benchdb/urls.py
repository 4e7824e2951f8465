"""URL map: pages at the root, the API under /api/, health under /health/."""

from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/", include("benchdb.api.urls")),
    path("", include("benchdb.ops.urls")),
    path("", include("benchdb.web.urls")),
]
