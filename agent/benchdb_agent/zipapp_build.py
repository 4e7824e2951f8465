"""Build the single-file agent: ``python -m benchdb_agent.zipapp_build OUT``.

The server offers the same file for download; it builds it with ``build``
from the installed package, so the download is always the server's version.
``vm`` builds it too, to copy the agent into the guest, from whatever agent is
running: a source tree or a pip install (a folder of files), or the
downloaded ``.pyz`` itself (a zip, whose members are read from the archive:
a folder walk finds nothing inside a zip).  Built from either, the bytes are
the same.
"""

from __future__ import annotations

import io
import sys
import zipfile
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
MAIN = "import sys\nfrom benchdb_agent.cli import main\nsys.exit(main())\n"
# The agent's files: its modules and its data (the bundle schema).
SUFFIXES = (".py", ".json")
# Without these the built file cannot start; checked so that an agent loaded
# in a way this builder cannot read fails here, not inside a guest.
REQUIRED = ("__init__.py", "__main__.py", "cli.py", "bundle.schema.json")


class BuildError(RuntimeError):
    """The running agent's own files could not be read."""


def _wanted(relative: str) -> bool:
    return relative.endswith(SUFFIXES) and "__pycache__" not in relative.split("/")


def package_files() -> dict:
    """The running agent package's files: ``{path inside the package: bytes}``.

    Read from the zip when the agent runs from one (zipimport's loader knows
    the archive and the package's folder inside it), else from its folder.
    """
    loader = globals().get("__loader__")
    archive = getattr(loader, "archive", None)
    files = {}
    if archive:
        prefix = getattr(loader, "prefix", "").replace("\\", "/")
        with zipfile.ZipFile(archive) as zf:
            for name in zf.namelist():
                if name.startswith(prefix) and not name.endswith("/"):
                    relative = name[len(prefix) :]
                    if _wanted(relative):
                        files[relative] = zf.read(name)
        where = f"{archive} ({prefix})"
    else:
        for path in PACKAGE.rglob("*"):
            relative = path.relative_to(PACKAGE).as_posix()
            if path.is_file() and _wanted(relative):
                files[relative] = path.read_bytes()
        where = str(PACKAGE)
    missing = [name for name in REQUIRED if name not in files]
    if missing:
        raise BuildError(
            f"the agent's own files were not found in {where} (missing: "
            f"{', '.join(missing)}); build the .pyz from a source tree or a pip "
            "install of benchdb-agent"
        )
    return files


def build_bytes() -> bytes:
    """The zipapp as bytes: a shebang line, then a zip of the package."""
    buf = io.BytesIO()
    buf.write(b"#!/usr/bin/env python3\n")
    files = package_files()
    members = {"__main__.py": MAIN.encode()}
    for relative in sorted(files):
        members["benchdb_agent/" + relative] = files[relative]
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for arcname, data in members.items():
            # A fixed date and mode: the same agent always builds the same bytes.
            info = zipfile.ZipInfo(arcname, date_time=(2020, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            zf.writestr(info, data)
    return buf.getvalue()


def build(out: str) -> Path:
    target = Path(out)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(build_bytes())
    target.chmod(0o755)
    return target


if __name__ == "__main__":
    print(build(sys.argv[1] if len(sys.argv) > 1 else "dist/benchdb-agent.pyz"))
