"""API token authentication against hashed ``ApiToken`` rows.

``Authorization: Token <key>``.  Only a token's SHA-256 is stored, so the
lookup hashes the presented key; revoked tokens fail like unknown ones.
"""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions

from benchdb.results.models import ApiToken, hash_secret

# ``last_used`` is written at most this often per token: not on every request.
LAST_USED_RESOLUTION = timedelta(minutes=1)


class TokenAuthentication(authentication.BaseAuthentication):
    keyword = "Token"

    def authenticate(self, request):
        header = authentication.get_authorization_header(request).split()
        if not header or header[0].lower() != self.keyword.lower().encode():
            return None
        if len(header) != 2:
            raise exceptions.AuthenticationFailed(
                "Invalid token header: expected 'Authorization: Token <key>'."
            )
        try:
            key = header[1].decode("ascii")
        except UnicodeDecodeError:
            raise exceptions.AuthenticationFailed("Invalid token.") from None
        token = (
            ApiToken.objects.select_related("user")
            .filter(key_hash=hash_secret(key), revoked__isnull=True)
            .first()
        )
        if token is None or not token.user.is_active:
            raise exceptions.AuthenticationFailed("Invalid or revoked token.")
        now = timezone.now()
        if token.last_used is None or now - token.last_used > LAST_USED_RESOLUTION:
            ApiToken.objects.filter(pk=token.pk).update(last_used=now)
        return token.user, token

    def authenticate_header(self, request) -> str:
        return self.keyword


class TokenScheme(OpenApiAuthenticationExtension):
    """How the OpenAPI schema describes the token header."""

    target_class = TokenAuthentication
    name = "tokenAuth"

    def get_security_definition(self, auto_schema):
        return {
            "type": "apiKey",
            "in": "header",
            "name": "Authorization",
            "description": "'Token <key>' (manage.py create_api_token USERNAME, or "
            "POST /api/v1/tokens/ signed in).",
        }
