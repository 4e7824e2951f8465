"""URL map: pages at the root, the API under /api/, health under /health/."""

from django.contrib import admin
from django.urls import include, path

from benchdb.web.views import admin_login

urlpatterns = [
    # Before the admin's own: its sign-in page behind the sign-in limits.
    path("admin/login/", admin_login),
    path("admin/", admin.site.urls),
    path("api/", include("benchdb.api.urls")),
    path("", include("benchdb.ops.urls")),
    path("", include("benchdb.web.urls")),
]

# A path no route matches: JSON under /api/, the page elsewhere.
handler404 = "benchdb.api.exceptions.not_found"
