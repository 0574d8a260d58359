"""What this machine must provide for lab hosts: root, sshd, unshare, ssh-keygen and namespaces."""

from __future__ import annotations

import os
import shutil
import subprocess
from typing import Optional

SSHD = "/usr/sbin/sshd"
UNSHARE = "unshare"
SSH_KEYGEN = "ssh-keygen"
_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def which(program: str) -> str:
    """The program's path on the system search path (the bare name when it is not found)."""
    return shutil.which(program, path=_PATH) or program


def prerequisites_problem() -> Optional[str]:
    """Why lab hosts cannot run on this machine (None when they can)."""
    if os.geteuid() != 0:
        return "lab hosts need root (mount namespaces, bind mounts, sshd)"
    if not os.access(SSHD, os.X_OK):
        return f"{SSHD} is missing: install Debian's openssh-server (make system-deps)"
    for program in (UNSHARE, SSH_KEYGEN, "ssh"):
        if shutil.which(program, path=_PATH) is None:
            return f"{program} is missing (util-linux / openssh-client)"
    probe = subprocess.run(  # noqa: S603 - argv list
        [which(UNSHARE), "--mount", "--uts", "--pid", "--fork", "--mount-proc",
         "--propagation", "private", "--", "/bin/true"],
        capture_output=True, text=True, check=False, timeout=20,
    )
    if probe.returncode != 0:
        return f"unshare cannot create mount/UTS/PID namespaces here: {probe.stderr.strip()}"
    return None


def can_lock_mounts() -> bool:
    """Whether this machine allows a user namespace (used to lock the mounts inside hosts)."""
    probe = subprocess.run(  # noqa: S603 - argv list
        [which(UNSHARE), "--user", "--map-root-user", "--mount", "--", "/bin/true"],
        capture_output=True, check=False, timeout=20,
    )
    return probe.returncode == 0
