"""Lab hosts: one real sshd per simulated GPU host, each in its own mount/UTS/PID namespaces.

A lab directory (DIR) holds everything a lab writes (nothing outside it is written)::

    DIR/lab.json               what was started (hosts, addresses, port); read by ``status``
    DIR/pids.json              the processes started, with their namespaces; ``down`` kills only these
    DIR/inventory.yml          Ansible inventory (group lab_gpu_hosts + the groups given per host)
    DIR/ssh/                   client key (id_ed25519), host key, authorized_keys
    DIR/.ns/real/{usr,etc}     empty mount points: inside a host they show the real dirs read-only
    DIR/.ns/views.json         what a host's /usr/bin, /usr/sbin and /etc contain (view_manifests)
    DIR/hosts/NAME/state.json  the host's GPU state (gpulab.gpustate); state.json.boot_id is
                               bind-mounted over /proc/sys/kernel/random/boot_id
    DIR/hosts/NAME/bin/        launchers (gpulab.launchers), bind-mounted at the real tool paths
    DIR/hosts/NAME/etc/nvidia-mig-manager/, etc/systemd/system/nvidia-mig-manager.service.d/
                               the host's own directories (bind-mounted at the same /etc paths)
    DIR/hosts/NAME/var/run/cdi/management.nvidia.com-gpu.yaml
                               the host's management CDI spec (written at up and by its nvidia-ctk, ``ctk``)
    DIR/hosts/NAME/sshd_config, sshd.log, nsinit.json, nsinit-status.json

Modules: ``specs`` (host specs and their checks), ``layout`` (the files of DIR), ``system`` (what
the machine must provide), ``sandbox`` (what a host sees of the real machine and what nsinit
checks), ``sshd`` (keys, sshd_config, port), ``processes`` (finding and stopping only what the lab
started), ``inventory`` (inventory.yml), ``lifecycle`` (up, down, status), ``ctk`` (the hosts'
``nvidia-ctk``). The PID namespace keeps
a host's processes (and its `kill`s, and a reboot(2) call) away from the real machine's.
"""

from gpulab.hosts.inventory import inventory_data, python_for_hosts, write_inventory
from gpulab.hosts.layout import LabPaths
from gpulab.hosts.lifecycle import NSINIT, cluster_status, down, running_hosts, status, tools_status, up
from gpulab.hosts.sandbox import (
    DANGEROUS_NAMES,
    EXTRA_DANGEROUS_PATHS,
    HOST_ETC_DIRS,
    MUST_BE_READ_ONLY,
    MUST_NOT_EXIST,
    PRIVATE_TMPFS,
    RUN_DIRS,
    SEARCH_DIRS,
    SHIM_PATHS,
    WRITABLE,
    dangerous_inodes,
    snapshot_dir,
    stat_key,
    view_manifests,
    viewed_dirs,
)
from gpulab.hosts.specs import GROUP, MAX_GPUS, MAX_HOSTS, Host, HostSpec, LabError, host_address, parse_host_spec, validate_specs
from gpulab.hosts.sshd import choose_port, ensure_keys, ssh_banner, sshd_config
from gpulab.hosts.system import SSH_KEYGEN, SSHD, UNSHARE, can_lock_mounts, prerequisites_problem

__all__ = [
    "DANGEROUS_NAMES", "EXTRA_DANGEROUS_PATHS", "GROUP", "HOST_ETC_DIRS", "MAX_GPUS", "MAX_HOSTS",
    "MUST_BE_READ_ONLY", "MUST_NOT_EXIST", "NSINIT", "PRIVATE_TMPFS", "RUN_DIRS", "SEARCH_DIRS", "SHIM_PATHS",
    "SSHD", "SSH_KEYGEN", "UNSHARE", "WRITABLE", "Host", "HostSpec", "LabError", "LabPaths", "can_lock_mounts",
    "choose_port", "cluster_status", "dangerous_inodes", "down", "ensure_keys", "host_address", "inventory_data",
    "parse_host_spec", "prerequisites_problem", "python_for_hosts", "running_hosts", "snapshot_dir", "ssh_banner",
    "sshd_config", "stat_key", "status", "tools_status", "up", "validate_specs", "view_manifests", "viewed_dirs",
    "write_inventory",
]
