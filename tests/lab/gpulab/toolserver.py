"""The lab's tool server: runs the served host tools (``nvidia-smi``) for every host of one lab.

``python -m gpulab.toolserver --dir LAB`` (started by ``gpulab up``, stopped by ``down`` by its
recorded PID). It loads the simulator once, listens on an abstract Unix socket named after the lab
directory (``socket_name``: nothing is written for it, and the hosts, which share the machine's
network namespace, reach it from their own mount namespaces), and answers each connection in a
forked child:

1. the request (``gpulab.toolclient.encode_request``) names the host, the tool, its argv and
   environment, and carries the caller's stdin, stdout and stderr as file descriptors;
2. the child puts those descriptors in place, takes the caller's environment and runs
   ``launchers.run`` exactly as the launcher would have, on that host's state file;
3. it sends the exit status back (4 bytes) and exits.

Only the user the server runs as may connect (``SO_PEERCRED``), only a tool in ``SERVED_TOOLS``
and only a host of this lab (a name, never a path) are served. Why it exists: ``toolclient``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import time
import traceback
from typing import Dict, List, Optional, Tuple

from gpulab import gpustate, launchers, smi
from gpulab.toolclient import PROTOCOL, SERVED_TOOLS

# Loaded once in the server, inherited by every forked child (launchers.run imports it on first use).
PRELOADED = (smi,)

HOST_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
INFO_FILE = "tools.json"
LOG_FILE = "tools.log"
_MAX_REQUEST = 1 << 20


class RequestError(Exception):
    """A request the server refuses (said on the caller's stderr, exit status 2)."""


def socket_name(lab_root: str) -> bytes:
    """The abstract socket of the lab at lab_root (the same name for the server and its launchers)."""
    digest = hashlib.sha256(os.path.abspath(lab_root).encode()).hexdigest()[:24]
    return b"\0gpulab-tools-" + digest.encode()


def decode_request(body: bytes) -> Tuple[str, str, List[str], Dict[str, str]]:
    """(host, tool, argv, environment) of one request body."""
    fields = body.split(b"\0")
    if len(fields) < 4 or fields[0] != PROTOCOL:
        raise RequestError("not a gpulab tool request")
    host, tool = fields[1].decode(), fields[2].decode()
    try:
        count = int(fields[3])
    except ValueError:
        raise RequestError("bad argument count") from None
    if count < 1 or 4 + count > len(fields):
        raise RequestError("bad argument count")
    argv = [arg.decode("utf-8", "surrogateescape") for arg in fields[4:4 + count]]
    environ: Dict[str, str] = {}
    for entry in fields[4 + count:]:
        key, _equals, value = entry.partition(b"=")
        environ[os.fsdecode(key)] = os.fsdecode(value)
    return host, tool, argv, environ


def host_files(lab_root: str, host: str, tool: str) -> Tuple[str, str]:
    """(state file, boot id file) of a host of this lab; RequestError for anything else."""
    if tool not in SERVED_TOOLS:
        raise RequestError(f"{tool!r} is not a served tool (served: {', '.join(SERVED_TOOLS)})")
    if not HOST_NAME.match(host):
        raise RequestError(f"{host!r} is not a lab host name")
    state_file = os.path.join(lab_root, "hosts", host, "state.json")  # hosts.layout.LabPaths.state_file
    if not os.path.isfile(state_file):
        raise RequestError(f"{host!r} is not a host of the lab in {lab_root}")
    return state_file, gpustate.boot_id_path(state_file)


def _receive(conn: socket.socket) -> Tuple[bytes, List[int]]:
    data, ancillary, _flags, _address = conn.recvmsg(4, socket.CMSG_SPACE(3 * struct.calcsize("i")))
    fds: List[int] = []
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds += list(struct.unpack("%di" % (len(payload) // struct.calcsize("i")), payload))
    while len(data) < 4:
        chunk = conn.recv(4 - len(data))
        if not chunk:
            raise RequestError("request cut short")
        data += chunk
    size = int.from_bytes(data, "big")
    if size > _MAX_REQUEST:
        raise RequestError("request too large")
    body = b""
    while len(body) < size:
        chunk = conn.recv(min(65536, size - len(body)))
        if not chunk:
            raise RequestError("request cut short")
        body += chunk
    return body, fds


def _take_streams(fds: List[int]) -> None:
    """The caller's stdin, stdout and stderr become this process's, and sys's streams write to them."""
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    sys.stdin = open(0, encoding="utf-8", errors="surrogateescape", closefd=False)  # noqa: SIM115
    sys.stdout = open(1, "w", encoding="utf-8", errors="surrogateescape", closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", encoding="utf-8", errors="backslashreplace", closefd=False)  # noqa: SIM115


def _run(lab_root: str, body: bytes) -> int:
    host, tool, argv, environ = decode_request(body)
    state_file, boot_id_file = host_files(lab_root, host, tool)
    os.environ.clear()
    os.environ.update(environ)
    time.tzset()
    try:
        return int(launchers.run(tool, argv, state_file, boot_id_file) or 0)
    except SystemExit as stop:
        return stop.code if isinstance(stop.code, int) else 1


def serve_one(lab_root: str, conn: socket.socket) -> None:
    """In the forked child: run one request and send its exit status back."""
    code = 1
    try:
        uid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))[1]
        if uid != os.getuid():
            raise RequestError(f"uid {uid} may not use this lab's tools")
        body, fds = _receive(conn)
        if len(fds) != 3:
            for fd in fds:
                os.close(fd)
            raise RequestError("expected the caller's stdin, stdout and stderr")
        _take_streams(fds)
        code = _run(lab_root, body)
    except RequestError as refused:
        sys.stderr.write(f"gpulab tool server: {refused}\n")
        code = 2
    except Exception:  # noqa: BLE001 - the caller sees the traceback, as from its own process
        traceback.print_exc()
        code = 1
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
    try:
        conn.sendall(int(code).to_bytes(4, "big", signed=True))
    except OSError:
        pass


def serve(lab_root: str) -> None:
    """Accept forever; each connection is answered by a forked child (reaped by the kernel)."""
    lab_root = os.path.abspath(lab_root)
    name = socket_name(lab_root)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(name)
    listener.listen(256)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    info = {"pid": os.getpid(), "socket": name.hex(), "tools": list(SERVED_TOOLS)}
    temporary = os.path.join(lab_root, INFO_FILE + ".tmp")
    with open(temporary, "w", encoding="utf-8") as handle:
        json.dump(info, handle)
    os.replace(temporary, os.path.join(lab_root, INFO_FILE))
    while True:
        try:
            conn, _address = listener.accept()
        except InterruptedError:  # pragma: no cover - retried by Python itself (PEP 475)
            continue
        if os.fork() == 0:
            listener.close()
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            try:
                serve_one(lab_root, conn)
            finally:
                os._exit(0)
        conn.close()


def start(lab_root: str, timeout: float = 10.0, python: Optional[str] = None) -> int:
    """Start the server for the lab at lab_root in the background; its PID once it listens."""
    lab_root = os.path.abspath(lab_root)
    info_path = os.path.join(lab_root, INFO_FILE)
    if os.path.exists(info_path):
        os.unlink(info_path)
    env = dict(os.environ, PYTHONPATH=launchers.LAB_ROOT)
    log_path = os.path.join(lab_root, LOG_FILE)
    argv = [python or sys.executable, "-m", "gpulab.toolserver", "--dir", lab_root]
    with open(log_path, "ab") as log:
        process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env,
                                   start_new_session=True, close_fds=True, cwd="/")  # noqa: S603
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the lab's tool server exited with {process.returncode}; see {log_path}")
        try:
            with open(info_path, encoding="utf-8") as handle:
                if json.load(handle).get("pid") == process.pid:
                    return process.pid
        except (OSError, ValueError):
            pass
        time.sleep(0.02)
    process.terminate()
    raise RuntimeError(f"the lab's tool server did not start within {timeout:.0f} s; see {log_path}")


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gpulab.toolserver", description=__doc__.splitlines()[0])
    parser.add_argument("--dir", required=True, help="the lab directory whose hosts are served")
    serve(parser.parse_args(argv).dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
