from django.contrib import admin

from benchdb.results import models


@admin.register(models.Run)
class RunAdmin(admin.ModelAdmin):
    list_display = (
        "id",
        "title",
        "role",
        "platform",
        "cache_mode",
        "source",
        "visibility",
        "suspect",
        "hidden",
        "created",
    )
    list_filter = (
        "role",
        "platform",
        "cache_mode",
        "storage_backend",
        "source",
        "visibility",
        "suspect",
        "hidden",
    )
    search_fields = ("title", "notes", "pair_id")
    raw_id_fields = ("hardware", "baseline", "owner")


@admin.register(models.Submission)
class SubmissionAdmin(admin.ModelAdmin):
    list_display = ("bundle_id", "status", "created", "run")
    list_filter = ("status",)
    raw_id_fields = ("run", "submitted_by")


admin.site.register(models.Hardware)
admin.site.register(models.CpuModel)
admin.site.register(models.DiskModel)
admin.site.register(models.Comparison)
admin.site.register(models.ApiToken)
