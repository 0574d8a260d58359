"""The launcher side of a served lab tool (``nvidia-smi``): what runs in the lab host's process.

A real ``nvidia-smi`` is a small C program: on a host with the persistence daemon it uses about
20 ms of CPU and lasts about 90 ms (most of it in the driver), on that host's own cores. The lab's
hosts all share the machine the controller runs on, and a launcher that imported the simulator
itself spent about 55 ms of that machine's CPU per call, mostly Python importing the lab
(``ARCHITECTURE.md``, "Host tools cost what the real ones do").

So the launcher of a served tool runs Python without ``site`` (``-IS``) and imports only this
module and ``_socket``: it hands its argv, environment and standard streams (file descriptors, over
``SCM_RIGHTS``) to the lab's tool server (``gpulab.toolserver``), which has the simulator loaded and
runs the call in a forked child; the exit status comes back. Without a server (a lab started by
older code, a unit test of a launcher) the launcher runs the simulator itself, as before.

Either way the call lasts at least ``MIN_SECONDS`` of the tool: what a warm ``nvidia-smi`` takes on a
real host, so that the lab is no faster than one either.

Nothing here may import more than ``_socket`` and ``importlib`` (already loaded, frozen): every import is
paid by every call. Hence the built-in generics in the annotations, not ``typing``.
"""

from __future__ import annotations

import _socket
import importlib
import posix  # built in: the environment without importing os
import sys
import time

# A warm nvidia-smi (persistence mode on) on a one-GPU host: real 0.089 s, user 0.008 s, sys 0.012 s
# (www.abhik.xyz/concepts/gpu/nvidia-persistence-daemon, "Measuring the Cold Start Tax", driver
# 565.57.01). Hosts with eight GPUs take longer (seconds without the daemon: Azure/aks-gpu#105), so
# this is the lower end of what a real host answers in.
MIN_SECONDS = {"nvidia-smi": 0.09}

# The tools whose launchers ask the tool server (the read-path ones; the others run in the launcher).
SERVED_TOOLS = ("nvidia-smi",)

PROTOCOL = b"gpulab-tools/1"


def encode_request(host: str, tool: str, argv: list[str], environ: dict[bytes, bytes]) -> bytes:
    """One request: NUL-separated fields (argv and environment entries never contain NUL)."""
    fields = [PROTOCOL, host.encode(), tool.encode(), str(len(argv)).encode()]
    fields += [arg.encode("utf-8", "surrogateescape") for arg in argv]
    fields += [key + b"=" + value for key, value in environ.items()]
    body = b"\0".join(fields)
    return len(body).to_bytes(4, "big") + body


def served(socket_name: bytes, host: str, tool: str, argv: list[str]) -> int | None:
    """The exit status the server reports; None when there is no server to ask."""
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    if sock.fileno() <= 2:  # a standard stream was closed and the socket took its number: run it here
        sock.close()
        return None
    try:
        try:
            sock.connect(socket_name)
        except OSError:
            return None
        request = encode_request(host, tool, argv, posix.environ)
        fds = b"".join(fd.to_bytes(4, sys.byteorder, signed=True) for fd in (0, 1, 2))
        sent = sock.sendmsg([request], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, fds)])
        if sent < len(request):
            sock.sendall(request[sent:])
        answer = b""
        while len(answer) < 4:
            chunk = sock.recv(4 - len(answer))
            if not chunk:
                break
            answer += chunk
    finally:
        sock.close()
    if len(answer) < 4:
        sys.stderr.write(f"gpulab: {tool}: the lab's tool server ended without an exit status\n")
        return 1
    return int.from_bytes(answer, "big", signed=True)


def run(socket_name: bytes, host: str, tool: str, argv: list[str], state_file: str, boot_id_file: str) -> int:
    """Entry point of a served launcher (argv: sys.argv): the exit status of the tool."""
    start = time.monotonic()
    code = served(socket_name, host, tool, list(argv))
    if code is None:  # no server: the simulator in this process, as before the server
        code = importlib.import_module("gpulab.launchers").run(tool, argv, state_file, boot_id_file)
    if sys.stdout is not None:  # None: the caller had closed it
        try:
            sys.stdout.flush()
        except (OSError, ValueError):
            pass
    left = MIN_SECONDS.get(tool, 0.0) - (time.monotonic() - start)
    if left > 0:
        time.sleep(left)
    return code
