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
import tempfile
from concurrent.futures import ThreadPoolExecutor
from typing import Dict, List, Optional, Sequence, Tuple

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
        return self._call(argv)

    def _call(self, argv: Sequence[str]) -> Tuple[int, str, str]:
        options = {"environ_update": self.environ} if self.environ else {}
        return self.mod.ansible.run_command(list(argv), **options)

    def run_together(self, argvs: Sequence[Sequence[str]]) -> List[Tuple[int, str, str]]:
        """Run read-only commands at the same time; (rc, stdout, stderr) of each, in order.

        A real ``nvidia-smi`` call mostly waits on the driver (about 0.1 s with the persistence
        daemon, seconds on some eight-GPU hosts), so calls that do not depend on each other need not
        wait for each other. Each is Ansible's ``run_command`` (what ansible-test 2.21's sanity asks
        modules to use instead of ``subprocess``), in a thread of its own: the threads only wait."""
        self.calls += len(argvs)
        if len(argvs) < 2:
            return [self._call(argv) for argv in argvs]
        with ThreadPoolExecutor(max_workers=len(argvs)) as pool:
            return list(pool.map(self._call, argvs))

    def run_mutating(self, argv: Sequence[str]) -> Tuple[int, str, str]:
        self.mutating.append(" ".join([os.path.basename(argv[0])] + list(argv[1:])))
        return self.run(argv)


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
