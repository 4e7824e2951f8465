"""Every way into an account is limited: both sign-in pages, sign-up, the
password reset, and tokens that cannot mint or revoke tokens."""

from __future__ import annotations

import re

import pytest
from django.core import mail
from django.test import Client, RequestFactory

from benchdb.api.throttling import DEVICE_COOKIE, remember_device
from benchdb.results.models import ApiToken
from tests.api.conftest import token_client

pytestmark = pytest.mark.django_db

GOOD = "right-horse-battery"


def test_the_admin_sign_in_is_limited_too(django_user_model, settings):
    settings.LOGIN_FAILURE_LIMIT = 3
    django_user_model.objects.create_user(
        "root", password=GOOD, is_staff=True, is_superuser=True
    )
    client = Client()
    for _ in range(3):
        response = client.post("/admin/login/", {"username": "root", "password": "x"})
        assert response.status_code == 200
    response = client.post("/admin/login/", {"username": "root", "password": GOOD})
    assert "_auth_user_id" not in client.session  # the right password refused
    assert response.status_code == 429
    # The failures on either page count for both.
    page = client.post("/accounts/login/", {"username": "root", "password": GOOD})
    assert page.status_code == 429


def test_admin_failures_count_against_the_sign_in_page(django_user_model, settings):
    settings.LOGIN_FAILURE_LIMIT = 2
    django_user_model.objects.create_user("ivy", password=GOOD)
    client = Client()
    client.post("/accounts/login/", {"username": "ivy", "password": "x"})
    client.post("/admin/login/", {"username": "ivy", "password": "x"})
    response = client.post("/accounts/login/", {"username": "ivy", "password": GOOD})
    assert response.status_code == 429


def test_a_token_cannot_create_or_revoke_tokens(alice):
    api = token_client(alice)
    own = ApiToken.objects.get(user=alice)
    other, _ = ApiToken.issue(alice, "laptop")
    response = api.post("/api/v1/tokens/", {"name": "minted"}, format="json")
    assert response.status_code == 403, response.content
    assert "signed in" in response.json()["errors"][0]["message"]
    assert api.delete(f"/api/v1/tokens/{other.pk}/").status_code == 403
    other.refresh_from_db()
    assert other.revoked is None
    assert ApiToken.objects.filter(user=alice).count() == 2
    # Listing its owner's tokens is still allowed; the session still does all.
    assert api.get("/api/v1/tokens/").status_code == 200
    own.refresh_from_db()
    assert own.revoked is None


def test_sign_up_is_limited_per_address(settings, monkeypatch):
    from benchdb.api.throttling import AccountThrottle

    monkeypatch.setattr(AccountThrottle, "rate", "2/hour", raising=False)
    statuses = []
    for i in range(3):
        client = Client()
        response = client.post(
            "/accounts/signup/",
            {
                "username": f"user{i}",
                "email": f"user{i}@example.org",
                "password1": "a-long-Passw0rd!",
                "password2": "a-long-Passw0rd!",
            },
        )
        statuses.append(response.status_code)
    assert statuses == [302, 302, 429]


def test_a_password_is_reset_by_e_mail(django_user_model, settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    django_user_model.objects.create_user(
        "judy", email="judy@example.org", password="old-Passw0rd!"
    )
    client = Client()
    page = client.get("/accounts/login/").content.decode()
    assert 'href="/accounts/password-reset/"' in page
    form = client.get("/accounts/password-reset/")
    assert form.status_code == 200
    assert 'class="auth"' in form.content.decode()  # styled like the others
    response = client.post("/accounts/password-reset/", {"email": "judy@example.org"})
    assert response.status_code == 302
    (message,) = mail.outbox
    assert message.to == ["judy@example.org"]
    link = re.search(r"http://testserver(/accounts/reset/\S+/)", message.body).group(1)
    confirm = client.get(link, follow=True)
    assert confirm.status_code == 200
    done = client.post(
        confirm.redirect_chain[-1][0],
        {"new_password1": "new-Passw0rd!x", "new_password2": "new-Passw0rd!x"},
    )
    assert done.status_code == 302
    signed_in = Client().post(
        "/accounts/login/", {"username": "judy", "password": "new-Passw0rd!x"}
    )
    assert signed_in.status_code == 302
    # An unknown address gets the same answer and no mail (no account probe).
    mail.outbox.clear()
    response = client.post("/accounts/password-reset/", {"email": "no@example.org"})
    assert response.status_code == 302 and mail.outbox == []


def test_the_device_cookie_is_secure_when_the_site_is(settings):
    settings.SESSION_COOKIE_SECURE = True
    request = RequestFactory().post("/accounts/login/")  # plain http to gunicorn
    response = Client().get("/accounts/login/")
    remember_device(request, response, "kim")
    assert response.cookies[DEVICE_COOKIE]["secure"] is True
