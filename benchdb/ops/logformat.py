"""One JSON object a line, for log pipelines (``LOG_FORMAT=json``).

Plain ``logging`` with no extra package: the fields a collector indexes on
(time, level, logger, message, process) plus the exception text when there is
one, so a traceback stays one record instead of many lines.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime


class JSONFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "pid": record.process,
        }
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False, default=str)
