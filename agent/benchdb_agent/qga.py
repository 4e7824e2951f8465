"""Talk to the QEMU guest agent (qemu-ga) inside a VM, from its host.

The host copies the agent zipapp into the guest and runs it there, without
SSH or network: ``guest-file-open``/``-write``/``-close`` carry the file in
base64 chunks, ``guest-exec`` starts the program and ``guest-exec-status``
is polled until it exits.  Three ways to reach the guest agent, one per
stack, all speaking the same QGA commands:

* the guest agent's own UNIX socket (the host side of its virtio-serial
  port, ``-chardev socket,path=...`` + ``virtserialport,name=
  org.qemu.guest_agent.0``), with the ``guest-sync-delimited`` handshake
  that discards whatever an earlier client left half-read in the channel;
* libvirt: ``virsh qemu-agent-command DOMAIN JSON``;
* Proxmox VE: ``qm guest exec`` / ``qm guest exec-status`` / ``qm agent``
  (``qm`` has no file commands, so files travel as the standard input of a
  ``guest-exec``).
"""

from __future__ import annotations

import base64
import json
import os
import random
import socket
import subprocess
import time

# qemu-ga refuses reads above 48 MiB and its JSON parser limits a message;
# 48 KiB of payload per guest-file-write keeps every message small.
CHUNK = 48 * 1024
AGENT_PORT_NAME = "org.qemu.guest_agent.0"


class QgaError(RuntimeError):
    """The guest agent could not be reached, or refused a command."""


class SocketChannel:
    """The guest agent's host-side UNIX socket (one client at a time)."""

    def __init__(self, path: str):
        self.path = path
        self.sock = None
        self.buffer = b""

    def describe(self) -> str:
        return f"guest agent socket {self.path}"

    def close(self) -> None:
        if self.sock is not None:
            try:
                self.sock.close()
            finally:
                self.sock = None
                self.buffer = b""

    def _connect(self, timeout: float) -> None:
        self.close()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(timeout)
        try:
            sock.connect(self.path)
        except OSError as exc:
            sock.close()
            raise QgaError(f"cannot connect to {self.path}: {exc}") from None
        self.sock = sock
        # guest-sync-delimited: the agent answers with a 0xFF byte, then the
        # id; everything before the 0xFF is stale output of an earlier client.
        token = random.randrange(1, 2**31)
        request = {"execute": "guest-sync-delimited", "arguments": {"id": token}}
        try:
            sock.sendall(b"\xff" + json.dumps(request).encode() + b"\n")
            while b"\xff" not in self.buffer:
                self._fill()
            self.buffer = self.buffer.split(b"\xff")[-1]
            while True:
                answer = self._read_message()
                if answer.get("return") == token:
                    return
        except (OSError, ValueError) as exc:
            self.close()
            raise QgaError(f"{self.path}: no answer to guest-sync: {exc}") from None

    def _fill(self) -> None:
        data = self.sock.recv(65536)
        if not data:
            raise OSError("the guest agent channel closed")
        self.buffer += data

    def _read_message(self) -> dict:
        while b"\n" not in self.buffer:
            self._fill()
        line, self.buffer = self.buffer.split(b"\n", 1)
        line = line.strip().lstrip(b"\xff")
        if not line:
            return self._read_message()
        return json.loads(line)

    def call(self, command: str, arguments: dict | None = None, timeout=30.0):
        if self.sock is None:
            self._connect(min(timeout, 10.0))
        message = {"execute": command}
        if arguments:
            message["arguments"] = arguments
        try:
            self.sock.settimeout(timeout)
            self.sock.sendall(json.dumps(message).encode() + b"\n")
            if command == "guest-shutdown":
                return None  # the guest powers off without answering
            answer = self._read_message()
        except (OSError, ValueError) as exc:
            self.close()
            raise QgaError(f"{command}: {exc}") from None
        if "error" in answer:
            raise QgaError(f"{command}: {answer['error'].get('desc', answer)}")
        return answer.get("return")


class VirshChannel:
    """``virsh qemu-agent-command``: libvirt owns the guest agent's socket."""

    def __init__(self, domain: str, connect: str | None = None, virsh="virsh"):
        self.domain = domain
        self.connect = connect
        self.virsh = virsh

    def describe(self) -> str:
        return f"virsh qemu-agent-command {self.domain}"

    def close(self) -> None:
        pass

    def command(self, command: str, arguments: dict | None, timeout: float) -> list:
        message = {"execute": command}
        if arguments:
            message["arguments"] = arguments
        argv = [self.virsh]
        if self.connect:
            argv += ["-c", self.connect]
        return argv + [
            "qemu-agent-command",
            self.domain,
            json.dumps(message),
            "--timeout",
            str(max(1, int(timeout))),
        ]

    def call(self, command: str, arguments: dict | None = None, timeout=30.0):
        argv = self.command(command, arguments, timeout)
        try:
            proc = subprocess.run(
                argv, capture_output=True, text=True, timeout=timeout + 30
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise QgaError(f"{' '.join(argv[:4])}: {exc}") from None
        if proc.returncode != 0:
            raise QgaError(f"virsh qemu-agent-command {command}: {proc.stderr.strip()}")
        if command == "guest-shutdown":
            return None
        try:
            return json.loads(proc.stdout).get("return")
        except ValueError:
            raise QgaError(f"virsh answered {proc.stdout[:200]!r}") from None


class Guest:
    """The guest's side of the work: copy files in and out, run programs."""

    def __init__(self, channel):
        self.channel = channel

    def describe(self) -> str:
        return self.channel.describe()

    def close(self) -> None:
        self.channel.close()

    def ping(self, timeout: float = 10.0) -> None:
        self.channel.call("guest-ping", timeout=timeout)

    def wait(self, timeout: float, interval: float = 1.0) -> float:
        """Wait until the guest agent answers; returns the seconds waited."""
        started = time.monotonic()
        last = None
        while time.monotonic() - started < timeout:
            try:
                self.ping(timeout=5.0)
                return time.monotonic() - started
            except QgaError as exc:
                last = exc
                self.channel.close()
                time.sleep(interval)
        raise QgaError(
            f"the guest agent did not answer within {timeout:.0f} s ({last})"
        )

    def write_file(self, path: str, data: bytes, mode: str = "wb") -> None:
        handle = self.channel.call(
            "guest-file-open", {"path": path, "mode": mode}, timeout=30
        )
        try:
            for start in range(0, len(data), CHUNK) or [0]:
                piece = data[start : start + CHUNK]
                self.channel.call(
                    "guest-file-write",
                    {"handle": handle, "buf-b64": base64.b64encode(piece).decode()},
                    timeout=60,
                )
        finally:
            self.channel.call("guest-file-close", {"handle": handle}, timeout=30)

    def read_file(self, path: str, limit: int = 256 * 2**20) -> bytes:
        handle = self.channel.call(
            "guest-file-open", {"path": path, "mode": "rb"}, timeout=30
        )
        out = b""
        try:
            while len(out) < limit:
                part = self.channel.call(
                    "guest-file-read",
                    {"handle": handle, "count": 4 * CHUNK},
                    timeout=60,
                )
                out += base64.b64decode(part.get("buf-b64", ""))
                if part.get("eof") or not part.get("count"):
                    break
        finally:
            self.channel.call("guest-file-close", {"handle": handle}, timeout=30)
        return out

    def start(self, argv: list, env: list | None = None) -> int:
        arguments = {"path": argv[0], "arg": list(argv[1:]), "capture-output": True}
        if env:
            arguments["env"] = env
        answer = self.channel.call("guest-exec", arguments, timeout=30)
        return int(answer["pid"])

    def status(self, pid: int) -> dict:
        return self.channel.call("guest-exec-status", {"pid": pid}, timeout=30)

    def run(
        self,
        argv: list,
        timeout: float,
        poll: float = 1.0,
        on_poll=None,
        env: list | None = None,
    ) -> tuple:
        """Run a program in the guest; returns (exit code, stdout, stderr).

        ``on_poll()`` is called between polls (progress display).
        """
        pid = self.start(argv, env)
        deadline = time.monotonic() + timeout
        try:
            while True:
                state = self.status(pid)
                if state.get("exited"):
                    break
                if time.monotonic() > deadline:
                    raise QgaError(
                        f"{argv[0]} in the guest did not finish within {timeout:.0f} s"
                    )
                if on_poll is not None:
                    on_poll()
                time.sleep(poll)
        except BaseException:
            # Ctrl-C, a signal (runner.Stopped), a timeout: the guest's
            # program is stopped too, whatever stopped us.
            self.stop(pid)
            raise
        code = state.get("exitcode")
        if code is None and state.get("signal") is not None:
            code = 128 + int(state["signal"])
        return code, _decoded(state, "out-data"), _decoded(state, "err-data")

    def stop(self, pid: int) -> None:
        """Best effort: SIGTERM to a program started in the guest (the agent
        removes its test files on SIGTERM)."""
        self.close()  # an interrupted call may have left an answer unread
        try:
            self.start(["kill", "-TERM", str(pid)])
        except (QgaError, KeyError, ValueError, TypeError):
            pass

    def shutdown(self) -> None:
        self.channel.call("guest-shutdown", {"mode": "powerdown"}, timeout=10)


def _decoded(state: dict, key: str) -> str:
    data = state.get(key)
    if not data:
        return ""
    if state.get("_decoded"):
        return data
    return base64.b64decode(data).decode("utf-8", "replace")


class QmGuest(Guest):
    """Proxmox VE: the guest agent through ``qm``.

    ``qm guest exec`` starts a program (``--synchronous 0`` answers with its
    pid at once), ``qm guest exec-status`` polls it (Proxmox decodes the
    output's base64 itself), ``qm agent VMID ping`` checks the agent.  Files
    travel as the standard input of a ``guest-exec`` (``--pass-stdin``),
    written by the guest's python3, which the agent needs anyway.
    """

    def __init__(self, vmid: str, qm: str = "qm"):
        self.vmid = str(vmid)
        self.qm = qm

    def describe(self) -> str:
        return f"qm guest exec {self.vmid}"

    def close(self) -> None:
        pass

    def _qm(self, argv: list, stdin: bytes | None = None, timeout: float = 60):
        try:
            proc = subprocess.run(
                argv, input=stdin, capture_output=True, timeout=timeout
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise QgaError(f"{' '.join(argv[:4])}: {exc}") from None
        if proc.returncode != 0:
            raise QgaError(
                f"{' '.join(argv[:4])}: {proc.stderr.decode(errors='replace').strip()}"
            )
        return proc.stdout.decode("utf-8", "replace")

    def ping_command(self) -> list:
        return [self.qm, "agent", self.vmid, "ping"]

    def exec_command(self, argv: list, pass_stdin: bool = False) -> list:
        cmd = [self.qm, "guest", "exec", self.vmid, "--synchronous", "0"]
        if pass_stdin:
            cmd += ["--pass-stdin", "1"]
        return cmd + ["--", *argv]

    def status_command(self, pid: int) -> list:
        return [self.qm, "guest", "exec-status", self.vmid, str(pid)]

    def ping(self, timeout: float = 10.0) -> None:
        self._qm(self.ping_command(), timeout=timeout)

    def start(self, argv: list, env: list | None = None, stdin=None) -> int:
        if env:
            argv = ["env", *env, *argv]
        out = self._qm(self.exec_command(argv, stdin is not None), stdin=stdin)
        try:
            return int(json.loads(out)["pid"])
        except (ValueError, KeyError, TypeError):
            raise QgaError(f"qm guest exec answered {out[:200]!r}") from None

    def status(self, pid: int) -> dict:
        out = self._qm(self.status_command(pid))
        try:
            state = json.loads(out)
        except ValueError:
            raise QgaError(f"qm guest exec-status answered {out[:200]!r}") from None
        state["_decoded"] = True
        return state

    def write_file(self, path: str, data: bytes, mode: str = "wb") -> None:
        script = (
            "import shutil,sys;"
            "shutil.copyfileobj(sys.stdin.buffer,open(sys.argv[1],sys.argv[2]))"
        )
        pid = self.start(["python3", "-c", script, path, mode], stdin=data)
        self._wait_ok(pid, f"writing {path}")

    def read_file(self, path: str, limit: int = 256 * 2**20) -> bytes:
        script = (
            "import base64,sys;"
            "sys.stdout.write(base64.b64encode(open(sys.argv[1],'rb').read())"
            ".decode())"
        )
        pid = self.start(["python3", "-c", script, path])
        state = self._wait_ok(pid, f"reading {path}")
        return base64.b64decode(state.get("out-data") or "")

    def _wait_ok(self, pid: int, what: str, timeout: float = 300) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            state = self.status(pid)
            if state.get("exited"):
                if state.get("exitcode") != 0:
                    raise QgaError(f"{what} failed: {state.get('err-data', '')}")
                return state
            if time.monotonic() > deadline:
                raise QgaError(f"{what}: no end within {timeout} s")
            time.sleep(0.5)

    def shutdown(self) -> None:
        self._qm([self.qm, "shutdown", self.vmid], timeout=600)


def socket_from_cmdline(argv: list) -> str | None:
    """The guest agent's host socket in a QEMU command line, if it has one.

    The virtserialport named ``org.qemu.guest_agent.0`` names a chardev; a
    ``-chardev socket,...,path=P`` with that id is the socket (relative paths
    are relative to QEMU's working directory).
    """
    chardevs, port_chardev = {}, None
    for i, arg in enumerate(argv[:-1]):
        value = argv[i + 1]
        if arg in ("-chardev", "--chardev"):
            parts = dict(p.split("=", 1) for p in value.split(",")[1:] if "=" in p)
            if value.split(",")[0] == "socket" and "path" in parts:
                chardevs[parts.get("id")] = parts["path"]
        elif arg in ("-device", "--device") and f"name={AGENT_PORT_NAME}" in value:
            for part in value.split(","):
                if part.startswith("chardev="):
                    port_chardev = part.split("=", 1)[1]
    return chardevs.get(port_chardev) if port_chardev else None


def reachable(path: str) -> bool:
    return bool(path) and os.path.exists(path)
