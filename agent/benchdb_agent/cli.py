"""benchdb-agent: run the standard VM disk benchmark suite and share the results.

    benchdb-agent detect [--target DIR]            what the agent can see (JSON)
    benchdb-agent host-config --qemu-pid PID ...   a VM's disk settings as tags
    benchdb-agent run --target DIR [--upload URL]  run a profile, write a bundle
    benchdb-agent parse FILE                       normalize any tool output
    benchdb-agent import FILE...                   bundle existing tool outputs
    benchdb-agent upload FILE... | --pending       send bundles (spooled on failure)
    benchdb-agent vm --qemu-pid PID --disk ID ...  a VM's disk and its host, paired
    benchdb-agent vm --proxmox VMID --restore      undo a killed --cache-modes sweep

Exit codes: 0 success, 1 the run or upload failed, 2 bad usage or input,
3 refused for safety, 4 partial run (bundle kept, marked partial), 5 bundle
spooled for a later `upload --pending`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import textwrap
from pathlib import Path

from . import (
    DEFAULT_STATE_DIR,
    SWEEP_ROUNDS,
    __version__,
    bundle,
    detect,
    imports,
    parsers,
    runner,
    safety,
    suite,
    vocab,
)
from . import upload as upload_mod

EXIT_FAILED, EXIT_USAGE, EXIT_REFUSED, EXIT_PARTIAL, EXIT_SPOOLED = 1, 2, 3, 4, 5
EXIT_CODES = """exit codes:
  0  success: every test ran (and every upload was ingested or accepted)
  1  the run failed before measuring, or an upload was refused or failed
  2  bad usage or input (nothing was measured)
  3  refused for safety (a device that holds data or is in use)
  4  partial run: stopped by a signal or some tests failed; the partial
     bundle was written, marked partial, with what ran and why it stopped
  5  not sent yet: the server was busy or unreachable; the bundle is in the
     spool folder, resend it with `benchdb-agent upload --pending`"""


def die(message: str, code: int = EXIT_USAGE) -> None:
    sys.stderr.write(f"benchdb-agent: {message}\n")
    raise SystemExit(code)


def log(message: str) -> None:
    sys.stderr.write(f"benchdb-agent: {message}\n")


def parse_tags(items: list) -> dict:
    tags = {}
    for item in items or []:
        if "=" not in item:
            die(f"--tag {item!r}: expected key=value, e.g. --tag cache_mode=none")
        key, value = item.split("=", 1)
        problem = bundle.check_tag(key.strip(), value.strip())
        if problem:
            die(f"--tag {item!r}: {problem}")
        tags[key.strip()] = value.strip()
    return tags


def cmd_detect(args) -> int:
    env = detect.detect(args.target, include_identifiers=args.include_identifiers)
    if args.target and args.tag:
        problem = detect.check_declared_cache_mode(
            parse_tags(args.tag).get("cache_mode"), env.get("cache_mode_evidence")
        )
        if problem:
            env["cache_mode_contradiction"] = problem
    print(json.dumps(env, indent=2))
    return 0


def cmd_host_config(args) -> int:
    # Imported here, as vm below: a run does not pay for reading them.
    from . import hostconfig

    try:
        if args.qemu_pid:
            disks = hostconfig.for_qemu_pid(args.qemu_pid)
        elif args.qemu_cmdline:
            disks = hostconfig.for_qemu_cmdline(args.qemu_cmdline)
        elif args.qemu_cmdline_file:
            disks = hostconfig.for_qemu_cmdline(_read(args.qemu_cmdline_file))
        elif args.proxmox_config:
            storage = _read(args.storage_cfg) if args.storage_cfg else None
            disks = hostconfig.for_proxmox(_read(args.proxmox_config), storage)
        elif args.libvirt_xml:
            disks = hostconfig.for_libvirt_xml(_read(args.libvirt_xml))
        elif args.qmp_json:
            disks = hostconfig.for_qmp(_read(args.qmp_json))
        elif args.qmp_socket:
            disks = hostconfig.for_qmp_socket(args.qmp_socket)
        elif args.xl_cfg:
            disks = hostconfig.for_xl_cfg(_read(args.xl_cfg))
        else:
            disks = hostconfig.for_xl_json(_read(args.xl_json))
        chosen = hostconfig.select(disks, args.disk)
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        die(str(exc))
    if args.format == "tags":
        if len(chosen) == 1:
            print(hostconfig.tags_line(chosen[0]))
        else:
            for disk in chosen:
                what = (
                    "" if disk.is_target else f", {disk.kind}: not a benchmark target"
                )
                label = "".join(
                    c if c.isprintable() else "?" for c in f"{disk.id} ({disk.bus}"
                )
                print(f"# {label}{what})")
                print(hostconfig.tags_line(disk))
    elif args.disk:
        print(json.dumps(chosen[0].to_dict(), indent=2))
    else:
        print(json.dumps({"disks": [d.to_dict() for d in chosen]}, indent=2))
    return 0


def _read(path: str) -> str:
    return sys.stdin.read() if path == "-" else Path(path).read_text()


def cmd_parse(args) -> int:
    try:
        text = _read(args.file)
    except (OSError, UnicodeDecodeError) as exc:
        die(f"{args.file}: {exc}")
    try:
        result = parsers.parse(
            text, args.format, source=args.file, direction=args.direction
        )
    except parsers.ParseError as exc:
        die(str(exc))
    for note in result.get("notes") or []:
        log(f"{args.file}: {note}")
    print(json.dumps(result, indent=2))
    return 0


def cmd_import(args) -> int:
    tags = parse_tags(args.tag)
    for facet in imports.DECLARED_FACETS + ("virtio_win_version",):
        value = getattr(args, facet, None)
        if value:
            problem = bundle.check_tag(facet, value)
            if problem:
                die(f"--{facet.replace('_', '-')} {value!r}: {problem}")
            tags[facet] = value
    if args.pair is not None and not bundle.PAIR_RE.match(args.pair):
        die("--pair: 1-64 characters of A-Z a-z 0-9 . _ -")
    outputs = []
    if args.files.count("-") > 1:
        die("standard input (-) can be read once")
    for path in args.files:
        try:
            if path == "-":
                data = sys.stdin.buffer.read(parsers.MAX_INPUT_BYTES + 1)
            else:
                if Path(path).stat().st_size > parsers.MAX_INPUT_BYTES:
                    raise parsers.ParseError(
                        path,
                        f"larger than {parsers.MAX_INPUT_BYTES} bytes, the most one "
                        "tool output may be",
                    )
                data = Path(path).read_bytes()
            text, parsed = imports.read_output(data, path, args.format, args.direction)
        except OSError as exc:
            die(f"{path}: {exc}")
        except parsers.ParseError as exc:
            die(str(exc))
        for note in parsed.get("notes") or []:
            log(f"{path}: {note}")
        outputs.append((path, text, parsed))
    if sys.stdin.isatty() and not args.no_input and "-" not in args.files:
        _ask_facets(tags, outputs, args.role)
    missing = imports.undeclared(tags)
    if missing:
        log(
            "not declared (stored as unknown; a comparison says so): "
            + ", ".join(missing)
            + "; declare them with --platform, --cache-mode, ... or --tag"
        )
    doc = imports.build(
        outputs,
        role=args.role,
        tags=tags,
        pair_id=args.pair,
        title=args.title,
        test_id=args.test_id,
    )
    for test in doc["tests"]:
        log(f"{test['test_id']}: {test['title']} ({len(test['repeats'])} repeat(s))")
    return _emit(doc, args)


def _ask_facets(tags: dict, outputs: list, role: str) -> None:
    """Ask, on a terminal, for the facets the files cannot say (Enter: skip)."""
    windows = any(
        p["format"].startswith(("crystaldiskmark", "diskspd"))
        or "windows" in str((p.get("meta") or {}).get("os", "")).lower()
        for _n, _t, p in outputs
    )
    asked = imports.undeclared(tags)
    if windows and role == "guest" and not tags.get("virtio_win_version"):
        asked.append("virtio_win_version")
    for facet in asked:
        allowed = imports.choices(facet)
        hint = f" [{'/'.join(allowed)}]" if allowed else ""
        if facet == "virtio_win_version":
            hint = " (viostor/vioscsi DriverVersion, e.g. 100.95.104.26200)"
        while True:
            try:
                answer = input(f"{facet}{hint}: ").strip()
            except EOFError:
                return
            if not answer:
                break
            problem = bundle.check_tag(facet, answer)
            if problem is None:
                tags[facet] = answer
                break
            log(problem)


def _check_writable(path: str, what: str) -> None:
    """Refuse before measuring if a bundle could not be written there."""
    p = Path(path)
    if p.is_dir():
        die(f"{what} {path} is a directory; name a file", EXIT_USAGE)
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        die(f"{what} {path}: the folder {parent} does not exist", EXIT_USAGE)
    probe = parent / f".benchdb-write-test-{os.getpid()}"
    try:
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        die(f"{what} {path}: cannot write in {parent}: {exc.strerror}", EXIT_USAGE)


def _check_outputs(args) -> None:
    """--out, the current folder (the default bundle file) and the spool
    folder are checked before anything is measured."""
    if args.out:
        _check_writable(args.out, "--out")
    elif args.upload or not args.json:
        _check_writable("benchdb-bundle.json", "the bundle file in the current folder")
    if args.upload:
        try:
            spool = upload_mod.spool_dir(args.spool_dir)
        except OSError as exc:
            die(f"--spool-dir: cannot create it: {exc}", EXIT_USAGE)
        _check_writable(str(spool / "probe.json"), "the spool folder")


def cmd_run(args) -> int:
    tags = parse_tags(args.tag)
    if args.pair is not None and not bundle.PAIR_RE.match(args.pair):
        die("--pair: 1-64 characters of A-Z a-z 0-9 . _ -")
    if not args.target and not args.device:
        die("name what to test: --target DIR (or --device DEV)")
    try:
        size = runner.parse_size(args.size) if args.size else None
    except ValueError as exc:
        die(f"--size: {exc}")
    _check_outputs(args)
    claim = None
    if args.device:
        try:
            # Kept open (O_EXCL) for the whole run: nothing can mount it meanwhile.
            claim = safety.check_device(args.device, args.device_write_destroys_data)
        except safety.SafetyError as exc:
            die(str(exc), EXIT_REFUSED)
    try:
        return _run(args, tags, size)
    finally:
        if claim is not None:
            claim.close()


def _run(args, tags, size) -> int:
    try:
        doc = runner.run_suite(
            args.target,
            args.profile,
            role=args.role,
            pair_id=args.pair,
            tags=tags,
            repeats=args.repeats,
            max_repeats=args.max_repeats,
            runtime=args.runtime,
            size=size,
            only=args.test,
            allow_buffered=args.allow_buffered,
            include_identifiers=args.include_identifiers,
            ioping_count=args.ioping_count,
            device=args.device,
            precondition=not args.no_precondition,
            allow_virtual_host=args.allow_virtual_host,
            heartbeat=args.heartbeat,
            heartbeat_timeout=args.heartbeat_timeout,
        )
    except runner.RoleRefused as exc:
        die(str(exc), EXIT_USAGE)
    except safety.SafetyError as exc:
        die(str(exc), EXIT_REFUSED)
    except (runner.RunError, OSError) as exc:
        die(str(exc), EXIT_FAILED)
    except (runner.Stopped, KeyboardInterrupt) as exc:
        reason = getattr(exc, "reason", "SIGINT (Ctrl-C)")
        die(
            f"stopped by {reason} before the first test: nothing was measured; "
            "test files removed",
            EXIT_PARTIAL,
        )
    sys.stderr.write("\n" + runner.summary_table(doc) + "\n\n")
    if not doc["tests"] and (doc.get("stop_reason") or "").startswith("stopped by"):
        # Stopped before any test finished: no bundle can hold nothing.
        log(f"{doc['stop_reason']}: nothing was measured; test files removed")
        return EXIT_PARTIAL
    code = _emit(doc, args)
    if doc.get("partial") and code == 0:
        code = EXIT_PARTIAL
    return code


def _emit(doc: dict, args) -> int:
    problems = bundle.validate(doc)
    if problems:
        for pointer, message in problems:
            log(f"bundle invalid at {pointer}: {message}")
        return EXIT_FAILED
    text = bundle.dump(doc)
    path = args.out
    if not path and (args.upload or not args.json):
        path = f"benchdb-{doc['bundle_id']}.json"
    if path:
        # Written before any upload, atomically, whatever the upload does;
        # where it fits (a full --out falls back to the spool or here).
        try:
            spool = upload_mod.spool_dir(getattr(args, "spool_dir", None))
        except OSError:
            spool = None
        path = upload_mod.write_bundle(text, path, spool, log=log)
        state = " (PARTIAL: " + str(doc.get("stop_reason")) + ")"
        if path:
            log(f"bundle written to {path}" + (state if doc.get("partial") else ""))
        elif not args.json:
            log("the bundle follows on standard output: save it")
            print(text)
    if args.json:
        print(text)
    code = 0
    if args.upload and not doc["tests"]:
        log("nothing was measured: the bundle is not uploaded")
        return EXIT_FAILED
    for server in args.upload or []:
        rc = _upload_one(text.encode(), doc["bundle_id"], server, args, kept=path)
        code = max(code, rc)
    return code


def _keep_key(bundle_id: str, server: str, args, key, status_url=None) -> None:
    """Say an anonymous upload's owner key (the server shows it once) and keep
    it in the spool folder's owner-keys/."""
    if not key:
        return
    where = ""
    try:
        path = upload_mod.keep_owner_key(
            upload_mod.spool_dir(args.spool_dir), bundle_id, server, key, status_url
        )
        where = f" (kept in {path})"
    except OSError as exc:
        where = f" (could not keep it: {exc}: write it down)"
    log(f"keep this owner key to claim, edit or delete the run later: {key}{where}")


def _upload_one(body: bytes, bundle_id: str, server: str, args, kept=None) -> int:
    try:
        answer = upload_mod.send(server, body, args.token, log=log)
    except upload_mod.UploadError as exc:
        where = f"; the bundle stays in {kept}" if kept else ""
        _keep_key(bundle_id, server, args, exc.owner_key)
        if exc.final:
            log(f"the server refused the bundle: {exc}{where}")
            return EXIT_FAILED
        path = upload_mod.spool(
            body, bundle_id, server, upload_mod.spool_dir(args.spool_dir)
        )
        log(
            f"could not send ({exc}); spooled in {path}: resend with "
            f"`benchdb-agent upload --pending`{where}"
        )
        return EXIT_SPOOLED
    key = answer.get("owner_key")
    if key:
        _keep_key(bundle_id, server, args, key, answer.get("status_url"))
    else:
        # A resend (200) does not show the key again: the one kept, if any.
        key = upload_mod.kept_owner_key(
            upload_mod.spool_dir(args.spool_dir), bundle_id, server
        )
        if key:
            log(f"this run's owner key was kept before: {key}")
    status_url = answer.get("status_url")
    if not status_url:
        log(f"sent to {server}, but its answer has no status URL: {answer}")
        return 0
    shown = {k: v for k, v in answer.items() if k != "owner_key"}
    log(f"sent to {server}: {json.dumps(shown)}; following its status")
    wait = getattr(args, "wait", upload_mod.DEFAULT_WAIT)
    final = upload_mod.follow(
        server, status_url, args.token, timeout=wait, owner_key=key
    )
    state = final.get("status")
    if state == "done":
        log(f"ingested: {upload_mod.run_page(server, final, key)}")
        return 0
    if state == "failed":
        log(f"the server could not ingest the bundle: {final.get('errors')}")
        return EXIT_FAILED
    log(
        f"not ingested yet after {wait:.0f} s (status {state or 'unknown'}); "
        f"follow {upload_mod.absolute(server, status_url)}"
    )
    return 0


def cmd_upload(args) -> int:
    spool = upload_mod.spool_dir(args.spool_dir)
    items = []
    if args.pending:
        for path in upload_mod.pending(spool):
            meta = path.with_suffix(".server")
            server = meta.read_text().strip() if meta.exists() else None
            items.append((path, [server] if server else args.server))
    for f in args.files:
        items.append((Path(f), args.server))
    if not items:
        log("nothing to send")
        return 0
    code = 0
    for path, servers in items:
        if not servers:
            die(f"{path}: no server: pass --server URL")
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            log(f"{path}: not a bundle: {exc}")
            code = EXIT_FAILED
            continue
        problems = bundle.validate(doc)
        if problems:
            log(f"{path}: invalid bundle at {problems[0][0]}: {problems[0][1]}")
            code = EXIT_FAILED
            continue
        body = path.read_bytes()
        for server in servers:
            rc = _upload_one(body, doc["bundle_id"], server, args, kept=str(path))
            code = max(code, rc)
            if rc == 0 and path.parent == spool:
                path.unlink()
                path.with_suffix(".server").unlink(missing_ok=True)
    return code


def cmd_vm(args) -> int:
    from . import vm as vm_mod

    if not args.restore and not args.disk:
        die("vm: --disk ID is required (except with --restore)", EXIT_USAGE)

    def emit(doc: dict, path: str) -> int:
        out = argparse.Namespace(
            out=path,
            json=False,
            upload=args.upload,
            token=args.token,
            spool_dir=args.spool_dir,
        )
        return _emit(doc, out)

    try:
        return vm_mod.run(args, emit, log)
    except (vm_mod.VmError, vm_mod.qga.QgaError) as exc:
        die(str(exc), EXIT_FAILED)
    except safety.SafetyError as exc:
        die(str(exc), EXIT_REFUSED)
    except (runner.RunError, OSError, ValueError) as exc:
        die(str(exc), EXIT_FAILED)
    except (runner.Stopped, KeyboardInterrupt) as exc:
        # As `run`: stopped by a signal is a partial run (what finished was
        # written and sent), exit 4.
        die(f"stopped by {getattr(exc, 'reason', 'SIGINT (Ctrl-C)')}", EXIT_PARTIAL)
    return EXIT_FAILED


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="benchdb-agent",
        description="Run the standard VM disk benchmark suite (fio, ioping, dd) "
        "in a guest or on its host, and share comparable results.",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--version", action="version", version=f"benchdb-agent {__version__}"
    )
    sub = p.add_subparsers(dest="command", required=True)

    def tag_arg(sp):
        sp.add_argument(
            "--tag",
            action="append",
            metavar="KEY=VALUE",
            help="what the guest cannot see, e.g. cache_mode=none, "
            "storage_backend=lvm (keys: "
            + ", ".join(sorted(vocab.TAG_VOCABULARIES))
            + ")",
        )

    def out_args(sp):
        sp.add_argument("--out", help="write the bundle to this file")
        sp.add_argument("--json", action="store_true", help="print the bundle")
        sp.add_argument(
            "--upload",
            action="append",
            metavar="URL",
            help="send the bundle to a benchdb server (repeatable)",
        )
        sp.add_argument(
            "--token",
            default=os.environ.get("BENCHDB_TOKEN"),
            help="API token (or BENCHDB_TOKEN)",
        )
        sp.add_argument("--spool-dir", help="where unsent bundles wait")
        sp.add_argument(
            "--wait",
            type=float,
            default=upload_mod.DEFAULT_WAIT,
            metavar="SECONDS",
            help="after an upload, follow its status this long for the run's "
            f"address (default {upload_mod.DEFAULT_WAIT:.0f})",
        )

    d = sub.add_parser("detect", help="print what the agent can see, as JSON")
    d.add_argument("--target", help="directory whose disk to describe")
    d.add_argument("--include-identifiers", action="store_true")
    tag_arg(d)
    d.set_defaults(func=cmd_detect)

    h = sub.add_parser(
        "host-config",
        help="read a VM's disk configuration: what QEMU really runs, per disk",
        description="Every disk of a VM with its effective cache mode, aio, "
        "iothread, bus, image format and storage backend, and where each value "
        "comes from.  FILE may be - for standard input.",
    )
    src = h.add_mutually_exclusive_group(required=True)
    src.add_argument("--qemu-pid", type=int, help="a running QEMU process")
    src.add_argument("--qemu-cmdline", metavar="TEXT", help="a QEMU command line")
    src.add_argument(
        "--qemu-cmdline-file",
        metavar="FILE",
        help="a QEMU command line in a file (qm showcmd, libvirt .args, "
        "/proc/PID/cmdline)",
    )
    src.add_argument(
        "--proxmox-config", metavar="FILE", help="`qm config VMID` or VMID.conf"
    )
    src.add_argument("--libvirt-xml", metavar="FILE", help="`virsh dumpxml` output")
    src.add_argument(
        "--qmp-json",
        metavar="FILE",
        help="QMP query-block reply (with query-iothreads, "
        "query-named-block-nodes replies if you have them)",
    )
    src.add_argument("--qmp-socket", metavar="PATH", help="a live QMP unix socket")
    src.add_argument("--xl-cfg", metavar="FILE", help="Xen xl.cfg or disk specs")
    src.add_argument("--xl-json", metavar="FILE", help="`xl list -l` JSON")
    h.add_argument("--storage-cfg", metavar="FILE", help="/etc/pve/storage.cfg")
    h.add_argument(
        "--disk", help="one disk (scsi0, vda, xvda, a drive id or node-name)"
    )
    h.add_argument("--format", choices=["json", "tags"], default="json")
    h.set_defaults(func=cmd_host_config)

    r = sub.add_parser(
        "run",
        help="run a profile of the suite",
        description="Run a profile of the suite on a test file in --target (or a "
        "blank --device) and write one bundle; at the end a table of what was "
        "measured is printed on standard error.",
        epilog=profiles_help() + "\n\n" + EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    r.add_argument("--target", help="directory on the disk to test")
    r.add_argument("--profile", choices=suite.PROFILES, default="quick")
    r.add_argument("--role", choices=vocab.values(vocab.ROLE), default="guest")
    r.add_argument("--pair", help="id shared by a guest run and its host baseline")
    r.add_argument(
        "--heartbeat",
        metavar="FILE",
        help="stop as on SIGTERM when FILE has not been touched for "
        f"{runner.HEARTBEAT_TIMEOUT:.0f} s (`vm` touches it in the guest while "
        "it watches the run, so a killed `vm` stops the guest's run too)",
    )
    r.add_argument(
        "--heartbeat-timeout",
        type=_positive,
        default=int(runner.HEARTBEAT_TIMEOUT),
        metavar="S",
        help="seconds without a touch of --heartbeat before stopping",
    )
    r.add_argument(
        "--allow-virtual-host",
        action="store_true",
        help="with --role host inside a VM: measure anyway; the run is marked "
        "virtual_host and never used as a bare-metal baseline",
    )
    r.add_argument(
        "--repeats", type=_positive, help="repeats per test (default 3, full 5)"
    )
    r.add_argument("--max-repeats", type=_positive, help="cap when the spread is wide")
    r.add_argument("--runtime", type=_positive, help="seconds per fio test")
    r.add_argument("--size", help="test file size (default: twice the RAM, 1-16 GiB)")
    r.add_argument(
        "--ioping-count",
        type=_positive,
        help="at most this many ioping requests per repeat (default: as many "
        "as --runtime allows, one every 10 ms)",
    )
    r.add_argument("--test", action="append", help="run only this test id (repeatable)")
    r.add_argument(
        "--allow-buffered",
        action="store_true",
        help="measure a target without O_DIRECT (figures marked buffered)",
    )
    r.add_argument("--device", help="a block device (refused unless blank)")
    r.add_argument(
        "--device-write-destroys-data",
        action="store_true",
        help="allow writing to --device (still refused if it holds anything)",
    )
    r.add_argument(
        "--no-precondition",
        action="store_true",
        help="with --device: skip the sequential write of the measured range "
        "before the tests (recorded in the bundle and warned about)",
    )
    r.add_argument(
        "--include-identifiers",
        action="store_true",
        help="include hostname and machine UUID in the bundle",
    )
    tag_arg(r)
    out_args(r)
    r.set_defaults(func=cmd_run)

    pa = sub.add_parser("parse", help="normalize a fio/ioping/dd output")
    pa.add_argument("file", help="a file, or - for standard input")
    pa.add_argument("--format", choices=parsers.FORMATS)
    pa.add_argument(
        "--direction",
        choices=["read", "write", "trim"],
        help="for dd and ioping -B, which do not print it",
    )
    pa.set_defaults(func=cmd_parse)

    im = sub.add_parser(
        "import",
        help="turn existing results (fio, ioping, dd, CrystalDiskMark, KDiskMark, "
        "DiskSpd, YABS, Phoronix Test Suite) into a bundle",
        description="Each job of each file becomes a test named by its workload "
        "(a CrystalDiskMark RND4K Q32T1 read is the suite's "
        "fio-rand-read-4k-q32t1); the same workload in several files is one "
        "test with a repeat per file. Files cannot say how the VM's storage was "
        "set up: declare it (asked on a terminal); the run says 'declared, not "
        "verified'.",
    )
    im.add_argument("files", nargs="+", help="files, or - for standard input")
    im.add_argument("--format", choices=parsers.FORMATS)
    im.add_argument(
        "--direction",
        choices=["read", "write", "trim"],
        help="for dd and ioping -B, which do not print it",
    )
    im.add_argument("--test-id", help="one test id for all files (they become repeats)")
    im.add_argument("--role", choices=vocab.values(vocab.ROLE), default="guest")
    im.add_argument("--pair", help="pair id shared with the host's import")
    im.add_argument("--title", help="a title for the run")
    for facet in imports.DECLARED_FACETS + ("virtio_win_version",):
        allowed = imports.choices(facet)
        im.add_argument(
            "--" + facet.replace("_", "-"),
            dest=facet,
            choices=allowed or None,
            help="the Windows guest's viostor/vioscsi driver version"
            if facet == "virtio_win_version"
            else None,
        )
    im.add_argument(
        "--no-input", action="store_true", help="never ask for undeclared facets"
    )
    tag_arg(im)
    out_args(im)
    im.set_defaults(func=cmd_import)

    v = sub.add_parser(
        "vm",
        help="on a KVM host: a VM disk's guest run and host baseline, paired, "
        "tagged from the real configuration; --cache-modes sweeps its cache modes",
    )
    which = v.add_mutually_exclusive_group(required=True)
    which.add_argument("--proxmox", metavar="VMID", help="a Proxmox VE VM")
    which.add_argument("--libvirt", metavar="DOMAIN", help="a libvirt domain")
    which.add_argument("--qemu-pid", type=int, metavar="PID", help="a plain QEMU")
    v.add_argument(
        "--disk",
        help="the disk: scsi0/virtio1 (Proxmox), target dev vdb (libvirt), "
        "-drive id (QEMU); required except with --restore",
    )
    v.add_argument("--connect", metavar="URI", help="libvirt URI (virsh -c)")
    v.add_argument("--qmp", metavar="SOCKET", help="QEMU's QMP socket (query-block)")
    v.add_argument("--qga-socket", metavar="SOCKET", help="the guest agent socket")
    tgt = v.add_mutually_exclusive_group()
    tgt.add_argument("--guest-dir", help="directory in the guest to test")
    tgt.add_argument(
        "--guest-device", help="blank disk in the guest to test (its data is lost)"
    )
    v.add_argument("--guest-python", default="python3", help="python in the guest")
    v.add_argument(
        "--host-dir",
        help="scratch directory for the host baseline on the disk's storage "
        "(default: next to the image file)",
    )
    v.add_argument(
        "--cache-modes",
        metavar="MODES",
        help="sweep: none,writethrough,writeback,directsync,unsafe (or all); "
        "restarts the VM per mode and restores it at the end",
    )
    v.add_argument(
        "--rounds",
        type=_positive,
        default=SWEEP_ROUNDS,
        metavar="N",
        help="a sweep runs every mode once per round, each round in a fresh "
        f"random order (default {SWEEP_ROUNDS}); the order is recorded",
    )
    v.add_argument(
        "--sweep-seed",
        type=int,
        metavar="N",
        help="seed of the sweep's random order (default: a random one, "
        "printed, to repeat an order)",
    )
    v.add_argument("--yes", action="store_true", help="do not ask before a sweep")
    v.add_argument(
        "--restore",
        action="store_true",
        help="put back the original configuration a sweep saved (after an agent "
        "was killed mid-sweep), restart the VM with it, remove the state file",
    )
    v.add_argument(
        "--state-dir",
        metavar="DIR",
        default=os.environ.get("BENCHDB_AGENT_STATE_DIR"),
        help="where a sweep saves the VM's original configuration "
        f"(default {DEFAULT_STATE_DIR})",
    )
    v.add_argument("--pair", help="pair id (default: generated)")
    v.add_argument("--out-dir", help="where the bundles are written (default .)")
    v.add_argument(
        "--agent-timeout",
        type=_positive,
        default=300,
        metavar="S",
        help="seconds to wait for the guest agent to answer, at the start and "
        "after each restart of a --cache-modes sweep (default 300; without "
        "--cache-modes the first check waits at most 30)",
    )
    v.add_argument(
        "--guest-timeout",
        type=_positive,
        default=7200,
        metavar="S",
        help="seconds the benchmark inside the guest may take before the "
        "command gives up on it with an error (default 7200)",
    )
    v.add_argument("--profile", choices=suite.PROFILES, default="quick")
    v.add_argument("--repeats", type=_positive)
    v.add_argument("--max-repeats", type=_positive)
    v.add_argument("--runtime", type=_positive)
    v.add_argument("--size")
    v.add_argument("--ioping-count", type=_positive)
    v.add_argument("--test", action="append")
    v.add_argument("--upload", action="append", metavar="URL", help="send both bundles")
    v.add_argument("--token", default=os.environ.get("BENCHDB_TOKEN"))
    v.add_argument("--spool-dir")
    v.set_defaults(func=cmd_vm)

    u = sub.add_parser("upload", help="send bundles; --pending resends spooled ones")
    u.add_argument("files", nargs="*")
    u.add_argument("--server", action="append", help="benchdb server URL (repeatable)")
    u.add_argument("--pending", action="store_true")
    u.add_argument("--token", default=os.environ.get("BENCHDB_TOKEN"))
    u.add_argument("--spool-dir")
    u.add_argument(
        "--wait",
        type=float,
        default=upload_mod.DEFAULT_WAIT,
        metavar="SECONDS",
        help="follow each upload's status this long for the run's address",
    )
    u.set_defaults(func=cmd_upload)
    return p


def profiles_help() -> str:
    lines = ["profiles:"]
    for name in suite.PROFILES:
        d = suite.PROFILE_DEFAULTS[name]
        minutes = suite.estimate_seconds(name) / 60
        size = "a 1 GiB" if d.get("size") == 2**30 else "a twice-the-RAM (1-16 GiB)"
        lines.append(
            f"  {name:9s} about {minutes:.0f} min (more if the spread is wide); "
            f"disk: {size} test file + 1 GiB for dd"
        )
        lines += textwrap.wrap(
            d["summary"],
            width=76,
            initial_indent="  " + " " * 10,
            subsequent_indent="  " + " " * 10,
        )
        lines += textwrap.wrap(
            "file size: " + d["size_choice"],
            width=76,
            initial_indent="  " + " " * 10,
            subsequent_indent="  " + " " * 10,
        )
    return "\n".join(lines)


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        code = args.func(args)
        sys.stdout.flush()
    except BrokenPipeError:
        # `benchdb-agent parse FILE | head`: the reader left; that is fine.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    return code


if __name__ == "__main__":
    sys.exit(main())
