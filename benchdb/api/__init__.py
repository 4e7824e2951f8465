"""The REST API (Django REST Framework): no models of its own."""
