from django.urls import path

from benchdb.web import views

urlpatterns = [
    path("", views.home, name="home"),
    path("runs/<int:pk>/", views.run_detail, name="run-detail"),
    path("c/<slug:slug>", views.comparison_share, name="comparison-share"),
]
