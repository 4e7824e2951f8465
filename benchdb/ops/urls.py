from django.urls import path

from benchdb.ops import views

urlpatterns = [
    path("health/", views.health, name="health"),
]
