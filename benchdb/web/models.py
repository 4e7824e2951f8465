from django.db import models


class KeptPage(models.Model):
    """A page kept as written for anonymous visitors, shared by every web
    process (``web/kept.py``): one row per address, under the stamp it was
    written at. A cache: the table is unlogged (migration 0001), so a crash
    empties it, and nothing is lost but the next visitor's render."""

    address = models.TextField(primary_key=True)
    stamp = models.TextField()
    content = models.BinaryField()
    content_type = models.TextField()

    def __str__(self) -> str:
        return self.address
