"""Forms of the pages that are not Django's own."""

from __future__ import annotations

from django import forms
from django.contrib.auth.forms import UserCreationForm


class SignupForm(UserCreationForm):
    """Django's sign-up form with an e-mail address, the only way to reset a
    forgotten password (never shown to anyone)."""

    email = forms.EmailField(
        required=False,
        help_text="Optional: where a password reset is sent. Never shown.",
    )

    class Meta(UserCreationForm.Meta):
        fields = ("username", "email")
