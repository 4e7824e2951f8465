"""CSV for run lists and comparisons (``?format=csv``).

Views hand this renderer ``{"columns": [...], "rows": [{...}, ...]}``; an
error body (``{"errors": [...]}``) becomes a two-column CSV of pointers and
messages, so a failed export still says what went wrong in the format asked.
"""

from __future__ import annotations

import csv
import io

from rest_framework.renderers import BaseRenderer

from benchdb.results.exports import csv_cell


class CSVRenderer(BaseRenderer):
    media_type = "text/csv"
    format = "csv"
    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None) -> bytes:
        out = io.StringIO()
        if isinstance(data, dict) and "rows" in data and "columns" in data:
            writer = csv.DictWriter(
                out, fieldnames=data["columns"], extrasaction="ignore"
            )
            writer.writeheader()
            for row in data["rows"]:
                writer.writerow({k: csv_cell(v) for k, v in row.items()})
        elif isinstance(data, dict) and "errors" in data:
            writer = csv.writer(out)
            writer.writerow(["pointer", "message"])
            for error in data["errors"]:
                writer.writerow(
                    [csv_cell(error.get("pointer")), csv_cell(error.get("message"))]
                )
        else:
            writer = csv.writer(out)
            writer.writerow(["detail"])
            writer.writerow([csv_cell(str(data))])
        return out.getvalue().encode(self.charset)
