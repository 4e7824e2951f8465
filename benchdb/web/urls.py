from django.contrib.auth import views as auth_views
from django.templatetags.static import static
from django.urls import path
from django.views.generic import RedirectView

from benchdb.web import imports, owner, sweeps, views

urlpatterns = [
    path("", views.home, name="home"),
    # Browsers and feed readers ask for /favicon.ico whatever the page links.
    path("favicon.ico", RedirectView.as_view(url=static("img/favicon.svg"))),
    path("runs/", views.run_list, name="run-list"),
    path("runs/export/", views.run_export, name="run-export"),
    path("runs/<int:pk>/", views.run_detail, name="run-detail"),
    path("runs/<int:pk>/nearest/", views.run_nearest, name="run-nearest"),
    # The owner's pages (web/owner.py): the same actions as the API's.
    path("runs/mine/", owner.my_runs, name="my-runs"),
    path("runs/claim/", owner.run_claim, name="run-claim"),
    path("runs/<int:pk>/edit/", owner.run_edit, name="run-edit"),
    path("runs/<int:pk>/visibility/", owner.run_visibility, name="run-visibility"),
    path("runs/<int:pk>/delete/", owner.run_delete, name="run-delete"),
    path(
        "runs/<int:pk>/raw/<int:result_id>/<int:repeat>/",
        views.raw_output,
        name="raw-output",
    ),
    path("compare/", views.compare, name="compare"),
    path("compare/csv/", views.compare_csv, name="compare-csv"),
    path("compare/table/", views.compare_table, name="compare-table"),
    path("compare/markdown/", views.compare_markdown, name="compare-markdown"),
    path("compare/save/", views.compare_save, name="compare-save"),
    path("c/<slug:slug>", views.comparison_share, name="comparison-share"),
    path("sweeps/<str:sweep_id>/", sweeps.sweep, name="sweep"),
    path("reports/cache-modes/", views.cache_mode_report, name="report-cache-modes"),
    path("reports/overhead/", views.overhead_report, name="report-overhead"),
    path("submit/", views.submit, name="submit"),
    path("submit/import/", imports.import_results, name="import-results"),
    path("submit/import/<int:pk>/", imports.import_status, name="import-status"),
    path("agent/benchdb-agent.pyz", views.agent_download, name="agent-download"),
    path("tokens/", owner.tokens, name="tokens"),
    path("tokens/<int:pk>/revoke/", owner.token_revoke, name="token-revoke"),
    path("accounts/signup/", views.signup, name="signup"),
    path("accounts/login/", views.login_view, name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    # Password reset by e-mail (Django's views; names are theirs).
    path(
        "accounts/password-reset/",
        views.PasswordResetView.as_view(),
        name="password_reset",
    ),
    path(
        "accounts/password-reset/sent/",
        auth_views.PasswordResetDoneView.as_view(),
        name="password_reset_done",
    ),
    path(
        "accounts/reset/<uidb64>/<token>/",
        auth_views.PasswordResetConfirmView.as_view(),
        name="password_reset_confirm",
    ),
    path(
        "accounts/reset/done/",
        auth_views.PasswordResetCompleteView.as_view(),
        name="password_reset_complete",
    ),
]
