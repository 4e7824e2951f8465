"""The program the test guest runs after boot (inside QEMU, as PID 1's child).

The guest's ``/init`` finds the input/output disk (virtio-blk, serial
``BENCHDB-IO``), extracts the tar archive the host wrote onto it into
``/run/io`` and runs this file with the guest's python3.  It reads
``/run/io/job.json`` (written by ``tests.guests.harness``), then:

1. waits for the disk under test by its serial (``BENCH``): the sysfs place of
   the serial differs by bus (``serial`` for virtio-blk, the SCSI VPD page 0x80
   for virtio-scsi and ATA), and SCSI/ATA scans finish asynchronously;
2. records what the guest itself sees (sysfs attributes of that disk, DMI
   strings, the CPUID hypervisor flag, ``systemd-detect-virt``), which is the
   ground truth the agent's detection is checked against;
3. formats the disk (ext4), mounts it and runs the agent commands listed in
   the job against the mount;
4. writes everything it produced as a tar archive back over the same disk
   (the host reads it with :mod:`tarfile` once QEMU has exited), and prints a
   one-line summary between markers on the console for humans reading logs.

It is deliberately independent of the agent: it proves the guest side even
when the agent fails, and the harness reports both.
"""

import io
import json
import os
import subprocess
import sys
import tarfile
import time

IO_DIR = "/run/io"
OUT_DIR = "/run/out"
MOUNT = "/mnt/bench"


def uptime() -> float:
    """Seconds since the guest kernel started (the guest's own clock)."""
    with open("/proc/uptime") as handle:
        return float(handle.read().split()[0])


def read(path: str):
    """A sysfs/proc file's stripped text, or None when it does not exist."""
    try:
        with open(path, "rb") as handle:
            return handle.read().decode("utf-8", "replace").strip()
    except OSError:
        return None


def disk_serial(name: str):
    """The serial a block device reports, whatever bus it sits on."""
    serial = read(f"/sys/block/{name}/serial")
    if serial:
        return serial
    # SCSI and ATA disks (through libata's SCSI translation) expose the
    # unit serial number VPD page: 4 header bytes, then the ASCII serial.
    try:
        with open(f"/sys/block/{name}/device/vpd_pg80", "rb") as handle:
            page = handle.read()
    except OSError:
        return None
    return page[4:].decode("ascii", "replace").strip("\x00 ") or None


def find_disk(serial: str, timeout: float = 30.0):
    """The block device name whose serial is ``serial`` (waits for the scan)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for name in sorted(os.listdir("/sys/block")):
            if disk_serial(name) == serial:
                return name
        time.sleep(0.2)
    return None


def disk_facts(name: str) -> dict:
    """What sysfs says about the disk under test."""
    base = f"/sys/block/{name}"
    driver = None
    path = os.path.realpath(f"{base}/device")
    # Walk up the device path to the first node with a driver: the HBA or the
    # virtio transport, which tells the bus independently of the agent.
    drivers = []
    while path.startswith("/sys/devices") and path != "/sys/devices":
        link = os.path.join(path, "driver")
        if os.path.islink(link):
            drivers.append(os.path.basename(os.readlink(link)))
        path = os.path.dirname(path)
    driver = drivers[0] if drivers else None
    return {
        "name": name,
        "serial": disk_serial(name),
        "write_cache": read(f"{base}/queue/write_cache"),
        "rotational": read(f"{base}/queue/rotational"),
        "scheduler": read(f"{base}/queue/scheduler"),
        "logical_block_size": read(f"{base}/queue/logical_block_size"),
        "size_sectors": read(f"{base}/size"),
        "vendor": read(f"{base}/device/vendor"),
        "model": read(f"{base}/device/model"),
        "device_path": os.path.realpath(f"{base}/device"),
        "driver": driver,
        "drivers": drivers,
    }


def environment_facts() -> dict:
    """DMI strings, CPU flags and systemd-detect-virt as the guest sees them."""
    dmi = {}
    for key in ("sys_vendor", "product_name", "product_version", "bios_vendor"):
        dmi[key] = read(f"/sys/class/dmi/id/{key}")
    cpuinfo = read("/proc/cpuinfo") or ""
    flags, model = [], None
    for line in cpuinfo.splitlines():
        if line.startswith("flags") and not flags:
            flags = line.split(":", 1)[1].split()
        if line.startswith("model name") and model is None:
            model = line.split(":", 1)[1].strip()
    try:
        virt = subprocess.run(
            ["systemd-detect-virt"], capture_output=True, text=True, timeout=10
        ).stdout.strip()
    except OSError as exc:
        virt = f"error: {exc}"
    return {
        "dmi": dmi,
        "cpu_model": model,
        "hypervisor_flag": "hypervisor" in flags,
        "systemd_detect_virt": virt,
        "kernel": os.uname().release,
    }


CAPTURE_FILES = (
    "/proc/cpuinfo",
    "/proc/meminfo",
    "/proc/mounts",
    "/etc/os-release",
    "/sys/hypervisor/type",
    "/sys/devices/system/clocksource/clocksource0/current_clocksource",
)
CAPTURE_DMI = (
    "sys_vendor",
    "product_name",
    "product_version",
    "bios_vendor",
    "bios_version",
    "board_vendor",
    "chassis_vendor",
)
CAPTURE_BLOCK = (
    "serial",
    "size",
    "removable",
    "queue/rotational",
    "queue/scheduler",
    "queue/write_cache",
    "queue/logical_block_size",
    "queue/physical_block_size",
    "queue/hw_sector_size",
    "device/vendor",
    "device/model",
    "device/rev",
)


def capture(name: str) -> dict:
    """The guest's own files a detector reads, verbatim, for test fixtures.

    ``files`` maps a path to its text; ``links`` maps a symlink to where it
    resolves (sysfs device paths carry the bus topology); ``drivers`` maps each
    device directory above the disk that has a driver to the driver's name
    and its ``class`` file (PCI functions have one), which is how an ATA
    disk's controller (ahci or ata_piix) is told.
    """
    files, links = {}, {}
    paths = list(CAPTURE_FILES)
    paths += [f"/sys/class/dmi/id/{key}" for key in CAPTURE_DMI]
    paths += [f"/sys/block/{name}/{key}" for key in CAPTURE_BLOCK]
    for path in paths:
        text = read(path)
        if text is not None:
            files[path] = text
    for link in (f"/sys/block/{name}", f"/sys/block/{name}/device"):
        links[link] = os.path.realpath(link)
    drivers = {}
    path = os.path.realpath(f"/sys/block/{name}/device")
    while path.startswith("/sys/devices/") and path != "/sys/devices":
        driver = os.path.join(path, "driver")
        if os.path.islink(driver):
            drivers[path] = {
                "driver": os.path.basename(os.readlink(driver)),
                "class": read(os.path.join(path, "class")),
            }
        path = os.path.dirname(path)
    return {"files": files, "links": links, "drivers": drivers}


def run_step(name: str, argv: list, log: list, timeout: float) -> int:
    """Run one command, keeping its output files and timing in the log."""
    started = uptime()
    try:
        proc = subprocess.run(argv, capture_output=True, timeout=timeout)
        rc, out, err = proc.returncode, proc.stdout, proc.stderr
    except (OSError, subprocess.TimeoutExpired) as exc:
        rc, out, err = -1, b"", str(exc).encode()
    with open(os.path.join(OUT_DIR, f"{name}.stdout"), "wb") as handle:
        handle.write(out)
    with open(os.path.join(OUT_DIR, f"{name}.stderr"), "wb") as handle:
        handle.write(err)
    log.append(
        {"step": name, "argv": argv, "rc": rc, "seconds": round(uptime() - started, 3)}
    )
    print(f"benchdb-guest: {name} rc={rc} ({uptime() - started:.1f}s)", flush=True)
    return rc


def write_results(device: str) -> None:
    """Write OUT_DIR as a tar archive over the input/output disk."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in sorted(os.listdir(OUT_DIR)):
            tar.add(os.path.join(OUT_DIR, name), arcname=name)
    data = buffer.getvalue()
    with open(f"/dev/{device}", "r+b") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())


def main() -> int:
    """Do the job and always try to hand back what was gathered."""
    os.makedirs(OUT_DIR, exist_ok=True)
    with open(os.path.join(IO_DIR, "job.json")) as handle:
        job = json.load(handle)
    io_device = sys.argv[1]
    result = {"agent_started_uptime_s": uptime(), "steps": [], "errors": []}
    result["environment"] = environment_facts()
    bench = find_disk(job["bench_serial"])
    if bench is None:
        result["errors"].append(f"no disk with serial {job['bench_serial']}")
    else:
        result["disk"] = disk_facts(bench)
        steps = result["steps"]
        if run_step("mkfs", ["mkfs.ext4", "-q", "-F", f"/dev/{bench}"], steps, 120):
            result["errors"].append("mkfs.ext4 failed")
        else:
            os.makedirs(MOUNT, exist_ok=True)
            if run_step("mount", ["mount", f"/dev/{bench}", MOUNT], steps, 60):
                result["errors"].append("mount failed")
            else:
                # After the mount, so /proc/mounts shows the filesystem too.
                with open(os.path.join(OUT_DIR, "capture.json"), "w") as handle:
                    json.dump(capture(bench), handle, indent=1)
                for command in job.get("commands", []):
                    argv = [a.replace("{target}", MOUNT) for a in command["argv"]]
                    argv = [a.replace("{out}", OUT_DIR) for a in argv]
                    if run_step(command["name"], argv, steps, command["timeout"]):
                        result["errors"].append(f"{command['name']} failed")
                run_step("umount", ["umount", MOUNT], steps, 60)
    result["finished_uptime_s"] = uptime()
    with open(os.path.join(OUT_DIR, "result.json"), "w") as handle:
        json.dump(result, handle, indent=1)
    summary = {
        "errors": result["errors"],
        "write_cache": result.get("disk", {}).get("write_cache"),
    }
    print("===BENCHDB-GUEST-BEGIN===", flush=True)
    print(json.dumps(summary), flush=True)
    print("===BENCHDB-GUEST-END===", flush=True)
    write_results(io_device)
    return 0 if not result["errors"] else 1


if __name__ == "__main__":
    sys.exit(main())
