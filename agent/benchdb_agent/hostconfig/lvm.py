"""Whether a device path is LVM-thin or thick LVM: asked of LVM, never guessed.

A path such as ``/dev/pve/vm-100-disk-0`` or ``/dev/mapper/vg-lv`` names a
device-mapper device; whether it is a thin volume (allocates on first write),
a thick one (linear, striped, RAID: allocated up front) or not LVM at all
(dm-crypt, multipath) is in LVM's metadata, not in the name.  On the host
``lvs`` reports every logical volume with its ``segtype`` (``thin`` for a thin
volume, ``linear``/``striped``/``raid1``... for thick ones) and both of its
paths (``lv_path`` ``/dev/VG/LV`` and ``lv_dm_path`` ``/dev/mapper/VG-LV``).
Elsewhere (a config read on another machine, no ``lvs``) the answer is
unknown, and says so.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from typing import Dict, Optional, Tuple

LVS_FIELDS = "vg_name,lv_name,segtype,lv_path,lv_dm_path"
NOT_ASKED = (
    "an LVM or device-mapper path: LVM-thin, thick LVM or no LVM at all cannot "
    "be told from it; host-config on the host asks lvs (lv_name,segtype)"
)


def volumes(lvs: str = "lvs") -> Tuple[Optional[Dict[str, Tuple[str, str]]], str]:
    """(path -> (VG/LV, segtype) for every logical volume ``lvs`` lists, by
    both of its paths; or None when lvs is not installed or fails, and why)."""
    exe = shutil.which(lvs)
    if exe is None:
        return None, "no lvs here"
    try:
        proc = subprocess.run(
            [exe, "--noheadings", "--separator", "|", "-o", LVS_FIELDS],
            capture_output=True,
            text=True,
            timeout=20,
            env=dict(os.environ, LC_ALL="C", LVM_SUPPRESS_FD_WARNINGS="1"),
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return None, f"lvs failed: {exc}"
    if proc.returncode != 0:
        lines = [ln.strip() for ln in proc.stderr.splitlines() if ln.strip()]
        last = lines[-1] if lines else f"exit status {proc.returncode}"
        return None, f"lvs failed (run as root?): {last}"
    found: Dict[str, Tuple[str, str]] = {}
    for line in proc.stdout.splitlines():
        parts = [p.strip() for p in line.split("|")]
        if len(parts) != 5:
            continue
        vg, lv, segtype, lv_path, dm_path = parts
        for path in (lv_path, dm_path):
            if path:
                found[path] = (f"{vg}/{lv}", segtype)
    return found, ""


def backend(path: str, lvs: str = "lvs") -> Tuple[str, str]:
    """(storage_backend, why) of an LVM-looking device path, from ``lvs``."""
    found, failed = volumes(lvs)
    if found is None:
        return "unknown", f"{NOT_ASKED} ({failed})"
    hit = found.get(path)
    if hit is None and os.path.exists(path):
        real = os.path.realpath(path)
        hit = next((v for p, v in found.items() if os.path.realpath(p) == real), None)
    if hit is None:
        if os.path.exists(path):
            return "unknown", f"{path} is not a logical volume lvs lists here"
        return "unknown", NOT_ASKED + f" ({path} is not on this machine)"
    name, segtype = hit
    why = f"lvs on this host: {name} has segtype {segtype}"
    if segtype in ("thin", "thin-pool"):
        return "lvm-thin", why
    return "lvm", why
