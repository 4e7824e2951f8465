"""Kept pages shared by every web process (``web/kept.py``): one process's
render serves the others, where each kept its own and each of five workers
wrote every page once (bench/README.md, "Kept pages"). Unlogged: a cache
needs no write-ahead log, and a crash only empties it."""

from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    dependencies = []

    operations = [
        migrations.CreateModel(
            name="KeptPage",
            fields=[
                ("address", models.TextField(primary_key=True, serialize=False)),
                ("stamp", models.TextField()),
                ("content", models.BinaryField()),
                ("content_type", models.TextField()),
            ],
        ),
        migrations.RunSQL(
            "ALTER TABLE web_keptpage SET UNLOGGED",
            "ALTER TABLE web_keptpage SET LOGGED",
        ),
    ]
