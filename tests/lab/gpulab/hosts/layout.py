"""Where a lab keeps its files (``LabPaths``) and how its JSON records are read and written."""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any

from gpulab import gpustate


@dataclasses.dataclass(frozen=True)
class LabPaths:
    root: str

    @property
    def lab_json(self) -> str:
        return os.path.join(self.root, "lab.json")

    @property
    def pids_json(self) -> str:
        return os.path.join(self.root, "pids.json")

    @property
    def inventory(self) -> str:
        return os.path.join(self.root, "inventory.yml")

    @property
    def views_json(self) -> str:
        return os.path.join(self.root, ".ns", "views.json")

    @property
    def ssh_dir(self) -> str:
        return os.path.join(self.root, "ssh")

    @property
    def client_key(self) -> str:
        return os.path.join(self.ssh_dir, "id_ed25519")

    @property
    def host_key(self) -> str:
        return os.path.join(self.ssh_dir, "ssh_host_ed25519_key")

    @property
    def authorized_keys(self) -> str:
        return os.path.join(self.ssh_dir, "authorized_keys")

    def real_mount_point(self, top: str) -> str:
        """Where the real /usr (top="usr") or /etc is visible, read-only, inside every host."""
        return os.path.join(self.root, ".ns", "real", top.strip("/"))

    def host_dir(self, name: str) -> str:
        return os.path.join(self.root, "hosts", name)

    def host_file(self, name: str, file_name: str) -> str:
        """A file of the host's own directory (sshd_config, sshd.log, nsinit.json, nsinit-status.json)."""
        return os.path.join(self.host_dir(name), file_name)

    def state_file(self, name: str) -> str:
        return self.host_file(name, "state.json")

    def boot_id_file(self, name: str) -> str:
        """gpustate keeps it next to the state file and rewrites it (in place) on every reboot."""
        return gpustate.boot_id_path(self.state_file(name))

    def bin_dir(self, name: str) -> str:
        return self.host_file(name, "bin")

    def view_dir(self, name: str, real_dir: str) -> str:
        return self.host_file(name, real_dir.strip("/"))


def read_json(path: str, default: Any) -> Any:
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except FileNotFoundError:
        return default


def write_json(path: str, data: Any) -> None:
    """Atomically (write a temporary file, then rename it over ``path``)."""
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(data, handle, indent=1, sort_keys=True)
        handle.write("\n")
    os.replace(tmp, path)
