"""Content-Security-Policy on every response: no inline script, anywhere.

The pages keep their chart data in ``json_script`` blocks (JSON, not script)
and load one static file per page, so ``script-src 'self'`` is all they need;
an injected ``<script>`` or ``onerror=`` would not run even if escaping
failed somewhere.  Django 5.2 has no CSP setting of its own, hence this.
"""

from __future__ import annotations

PAGE_POLICY = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "font-src 'self'",
        "connect-src 'self'",
        "object-src 'none'",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ]
)
# Django's admin and the Swagger UI page set style attributes and a <style>
# block of their own; they still run no inline script.
RELAXED_STYLE_PREFIXES = ("/admin/", "/api/docs/")
RELAXED_POLICY = PAGE_POLICY.replace(
    "style-src 'self'", "style-src 'self' 'unsafe-inline'"
)


def content_security_policy(get_response):
    def middleware(request):
        response = get_response(request)
        if "Content-Security-Policy" not in response:
            relaxed = request.path.startswith(RELAXED_STYLE_PREFIXES)
            response["Content-Security-Policy"] = (
                RELAXED_POLICY if relaxed else PAGE_POLICY
            )
        return response

    return middleware
