"""Build the single-file agent: ``python -m benchdb_agent.zipapp_build OUT``.

The server offers the same file for download; it builds it with ``build``
from the installed package, so the download is always the server's version.
"""

from __future__ import annotations

import io
import sys
import zipfile
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
MAIN = "import sys\nfrom benchdb_agent.cli import main\nsys.exit(main())\n"


def build_bytes() -> bytes:
    """The zipapp as bytes: a shebang line, then a zip of the package."""
    buf = io.BytesIO()
    buf.write(b"#!/usr/bin/env python3\n")
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("__main__.py", MAIN)
        for path in sorted(PACKAGE.rglob("*")):
            if "__pycache__" in path.parts or path.is_dir():
                continue
            if path.suffix not in (".py", ".json"):
                continue
            arcname = "benchdb_agent/" + path.relative_to(PACKAGE).as_posix()
            info = zipfile.ZipInfo(arcname, date_time=(2020, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            zf.writestr(info, path.read_bytes())
    return buf.getvalue()


def build(out: str) -> Path:
    target = Path(out)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(build_bytes())
    target.chmod(0o755)
    return target


if __name__ == "__main__":
    print(build(sys.argv[1] if len(sys.argv) > 1 else "dist/benchdb-agent.pyz"))
