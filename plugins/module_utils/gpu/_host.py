# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The host modules' I/O on the managed host: commands (as argv lists, counted) and whole files.

What to run and what to write is decided by pure code (``_nvidia_smi``, ``_mig_apply``); this
file only does it. Failures raise through ``GpuFleetModule.fail``; nothing here exits.
"""

from __future__ import annotations

import os
import stat
import subprocess
import tempfile
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ansible.module_utils.common.process import get_bin_path

from ansible_collections.gpufleet.sharing.plugins.module_utils.base._module import GpuFleetModule


def find_binary(mod: GpuFleetModule, name: str, required: bool = False) -> Optional[str]:
    """The executable's path (None when absent); a missing required one fails with Ansible's message."""
    path = mod.ansible.get_bin_path(name)
    if path is None and required:
        try:
            path = get_bin_path(name)
        except ValueError as exc:
            mod.fail(str(exc))
    return path


class HostCommands:
    """Runs commands through the module, counts every call and logs the mutating ones."""

    def __init__(self, mod: GpuFleetModule, environ: Optional[Dict[str, str]] = None) -> None:
        self.mod = mod
        self.environ = dict(environ or {})
        self.calls = 0
        self.mutating: List[str] = []  # "nvidia-smi -i 0 -mig 1": binary name and arguments

    def run(self, argv: Sequence[str]) -> Tuple[int, str, str]:
        self.calls += 1
        options = {"environ_update": self.environ} if self.environ else {}
        return self.mod.ansible.run_command(list(argv), **options)

    def run_together(self, argvs: Sequence[Sequence[str]]) -> List[Tuple[int, str, str]]:
        """Run read-only commands at the same time; (rc, stdout, stderr) of each, in order.

        A real ``nvidia-smi`` call mostly waits on the driver (about 0.1 s with the persistence
        daemon, seconds on some eight-GPU hosts), so calls that do not depend on each other need not
        wait for each other. Output goes to unnamed temporary files: no pipe can fill up."""
        self.calls += len(argvs)
        env = dict(os.environ)
        env.update(self.environ)
        started: List[Tuple["subprocess.Popen[bytes]", Any, Any]] = []
        try:
            for argv in argvs:
                out, err = tempfile.TemporaryFile(), tempfile.TemporaryFile()  # pylint: disable=consider-using-with
                started.append((subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=out, stderr=err,  # pylint: disable=consider-using-with
                                                 env=env, close_fds=True), out, err))
        except OSError as exc:
            for process, _out, _err in started:
                process.kill()
                process.wait()
            self.mod.fail("could not run %s: %s" % (" ".join(argvs[len(started)]), exc))
        return [(process.wait(), _read_back(out), _read_back(err)) for process, out, err in started]

    def run_mutating(self, argv: Sequence[str]) -> Tuple[int, str, str]:
        self.mutating.append(" ".join([os.path.basename(argv[0])] + list(argv[1:])))
        return self.run(argv)


def _read_back(handle: Any) -> str:
    with handle:
        handle.seek(0)
        return handle.read().decode("utf-8", "replace")


def read_file(path: str) -> Tuple[Optional[str], Optional[int]]:
    """(text, permission bits) of a file; (None, None) when it is missing or unreadable."""
    try:
        with open(path, "rb") as handle:
            text = handle.read().decode("utf-8", "replace")
        return text, stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        return None, None


def write_file(mod: GpuFleetModule, path: str, text: str, mode: int, dir_mode: int, prefix: str) -> None:
    """Replace ``path`` atomically with ``text`` and ``mode``; a missing directory gets ``dir_mode``."""
    directory = os.path.dirname(path) or "."
    try:
        if not os.path.isdir(directory):
            os.makedirs(directory, dir_mode)
        handle, temp_path = tempfile.mkstemp(prefix=prefix, dir=directory)
        with os.fdopen(handle, "wb") as temp:
            temp.write(text.encode("utf-8"))
        os.chmod(temp_path, mode)
        mod.ansible.atomic_move(temp_path, path)
        os.chmod(path, mode)
    except OSError as exc:
        mod.fail("cannot write %s: %s" % (path, exc))
