# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""mig_config's side on the host: read the config file and the GPUs, run nvidia-smi or
nvidia-mig-parted as ``_mig_apply`` planned. The only I/O of mig_config besides its files.

Reads run ``nvidia-smi`` without counting as changes; every mutating command is logged (the
module's ``commands``). A failure after changes began reports those commands and the GPUs'
state at that moment.
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, List, NoReturn, Optional, Sequence, Tuple

from ansible.module_utils.basic import missing_required_lib

from ansible_collections.gpufleet.sharing.plugins.module_utils.gpu._host import HostCommands, find_binary
from ansible_collections.gpufleet.sharing.plugins.module_utils.mig._mig_apply import (
    GpuChange,
    HostPlan,
    clear_commands,
    create_command,
    mig_parted_commands,
    mode_command,
    reset_command,
    reset_failed_gpus,
    stray_pending_changes,
)
from ansible_collections.gpufleet.sharing.plugins.module_utils.mig._mig_parted import CONFIG_VERSION, current_layout, render_yaml
from ansible_collections.gpufleet.sharing.plugins.module_utils.base._module import GpuFleetModule
from ansible_collections.gpufleet.sharing.plugins.module_utils.gpu._nvidia_smi import (
    MODE_QUERY_ARGV,
    QUERY_ARGV,
    ParseError,
    build_gpu_facts,
    empty_answer,
    parse_compute_instances,
    parse_gpu_instances,
    parse_mode_query,
    parse_query_gpus,
    parse_summary,
)

try:
    import yaml

    HAS_YAML = True
    YAML_IMPORT_ERROR: Optional[ImportError] = None
except ImportError as exc:  # pragma: no cover - depends on the managed host
    HAS_YAML = False
    YAML_IMPORT_ERROR = exc


def read_document(mod: GpuFleetModule) -> Tuple[Any, str]:
    """The config document (decoded, not validated) and where it came from, for messages."""
    params = mod.params
    if params["config"] is not None:
        return params["config"], "config"
    path = params["config_file"]
    if not path:
        return {"version": CONFIG_VERSION, "mig-configs": {}}, "defaults"
    try:
        with open(path, "rb") as handle:
            text = handle.read().decode("utf-8")
    except OSError as exc:
        mod.fail("cannot read config_file %s: %s" % (path, exc))
    try:
        return json.loads(text), path
    except ValueError:
        pass
    if not HAS_YAML:
        mod.fail(missing_required_lib("PyYAML", reason="to read the YAML config_file %s" % path),
                 exception=str(YAML_IMPORT_ERROR))
    try:
        return yaml.safe_load(text), path
    except yaml.YAMLError as exc:
        mod.fail("config_file %s is not valid YAML: %s" % (path, exc))


class MigHost:
    """nvidia-smi (and nvidia-mig-parted when used) on this host."""

    def __init__(self, mod: GpuFleetModule) -> None:
        self.mod = mod
        self.run = HostCommands(mod)
        self.smi = find_binary(mod, "nvidia-smi", required=True)
        backend = mod.params["backend"]
        self.mig_parted: Optional[str] = None
        if backend in ("auto", "nvidia-mig-parted"):
            self.mig_parted = find_binary(mod, "nvidia-mig-parted", required=backend == "nvidia-mig-parted")

    @property
    def commands(self) -> List[str]:
        return self.run.mutating

    # ------------------------------------------------------------------ reading

    def read(self, argv: Sequence[str], allow_empty: bool = False) -> str:
        rc, out, err = self.run.run([self.smi] + list(argv))
        if rc != 0 and not (allow_empty and empty_answer(out, err)):
            self.mod.fail("nvidia-smi %s failed (rc=%d): %s" % (" ".join(argv), rc, (err or out).strip()),
                          rc=rc, stdout=out, stderr=err)
        return out

    def gather(self) -> List[Dict[str, Any]]:
        """gpu_facts-shaped entries: only the calls the comparison needs (no profile tables)."""
        try:
            rows = parse_query_gpus(self.read(QUERY_ARGV))
            summary = parse_summary(self.read([]))
            gis = cis = None
            # MIG device UUIDs (-L) are not needed to compare layouts: one call less per run.
            if any(row["mig_current"] for row in rows):
                gis = parse_gpu_instances(self.read(["mig", "-lgi"], allow_empty=True))
                cis = parse_compute_instances(self.read(["mig", "-lci"], allow_empty=True))
            return build_gpu_facts(rows, summary, None, gis, cis)
        except ParseError as exc:
            self.mod.fail("could not parse nvidia-smi output: %s" % exc)

    @staticmethod
    def exists(path: str) -> bool:
        """Whether ``path`` exists on the host (as ansible.builtin.stat's ``exists``)."""
        return os.path.exists(path)

    def mode_of(self, index: int) -> Tuple[bool, bool]:
        return parse_mode_query(self.read(["-i", str(index), *MODE_QUERY_ARGV]))

    # ------------------------------------------------------------------ writing

    def write(self, argv: Sequence[str], binary: Optional[str] = None, fail: bool = True) -> Tuple[int, str, str]:
        binary = binary or self.smi
        rc, out, err = self.run.run_mutating([binary] + list(argv))
        if rc != 0 and fail:
            self.fail_midway("%s %s failed (rc=%d): %s" % (os.path.basename(binary), " ".join(argv), rc,
                                                           (err.strip() or out.strip())), rc=rc, stdout=out, stderr=err)
        return rc, out, err

    def refresh_cdi(self, commands: Sequence[Sequence[str]]) -> None:
        """nvidia-ctk's commands (``cdi_refresh_commands``), logged as mutating; a failure fails the task."""
        for argv in commands:
            self.write(argv[1:], binary=argv[0])

    def fail_midway(self, msg: str, **extra: Any) -> NoReturn:
        """A command failed after changes began: report what ran and what the GPUs look like now."""
        now = [current_layout(gpu) for gpu in self.gather()]
        self.mod.fail(msg, commands=self.commands, after=now, **extra)

    def apply(self, plan: HostPlan, document: Dict[str, Any]) -> Tuple[str, List[int], bool]:
        """(backend used, GPUs left with a pending mode change, whether only a reboot helps)."""
        if self.mig_parted:
            return ("nvidia-mig-parted",) + self.apply_with_mig_parted(self.mig_parted, plan, document)
        return ("nvidia-smi",) + self.apply_with_nvidia_smi(plan)

    def apply_with_mig_parted(self, mig_parted: str, plan: HostPlan, document: Dict[str, Any]) -> Tuple[List[int], bool]:
        """assert, then apply only when needed.

        When apply fails because a GPU reset is not possible (mig-parted: "error resetting all GPUs"),
        the mode change stays pending on those GPUs: that is reported as a required reboot, as the
        nvidia-mig-manager service would reboot; any other failure fails the task.
        """
        params = self.mod.params
        check, apply = mig_parted_commands(self.mig_parted_config(document), plan.config_name,
                                           params["hooks_file"], params["gpu_reset"])
        rc, out, err = self.run.run([mig_parted] + check)
        if rc != 0:
            rc, out, err = self.write(apply, binary=mig_parted, fail=False)
        if rc == 0:
            self.undo_stray_pending(plan)
            return [], False
        pending = reset_failed_gpus(plan, self.gather())
        if pending and params["gpu_reset"]:
            self.mod.warn("nvidia-mig-parted could not reset GPU(s) %s: %s" % (
                ", ".join(str(i) for i in pending), (err.strip() or out.strip())))
            return pending, True
        self.fail_midway("nvidia-mig-parted %s failed (rc=%d): %s" % (" ".join(apply), rc, (err.strip() or out.strip())),
                         rc=rc, stdout=out, stderr=err)

    def undo_stray_pending(self, plan: HostPlan) -> None:
        """mig-parted judges the current MIG mode only: on a GPU already in the planned mode it leaves a change
        away from it pending (a reset or reboot would make it effective). Setting the planned mode again
        (nvidia-smi -mig) undoes it; the caller's read after the apply checks that it did."""
        for change in stray_pending_changes(plan):
            self.write(mode_command(change))

    def mig_parted_config(self, document: Dict[str, Any]) -> str:
        """The config file mig-parted reads: the user's file as is, else the rendered document."""
        params = self.mod.params
        if params["config"] is None and not params["include_defaults"] and params["config_file"]:
            return params["config_file"]
        path = os.path.join(self.mod.ansible.tmpdir, "mig-parted-config.yaml")
        with open(path, "w") as handle:
            handle.write(render_yaml(document))
        return path

    def apply_with_nvidia_smi(self, plan: HostPlan) -> Tuple[List[int], bool]:
        """Per changed GPU: destroy CIs then GIs, set the mode, reset if needed, create GIs + CIs."""
        pending: List[int] = []
        reboot_required = False
        for change in plan.changes:
            for argv in clear_commands(change):
                self.write(argv)
            outcome = self.set_mode(change) if change.mode_change else None
            if outcome is not None:
                pending.append(change.index)
                reboot_required = reboot_required or outcome == "reboot"
                continue
            argv = create_command(change)
            if argv:
                self.write(argv)
        return pending, reboot_required

    def set_mode(self, change: GpuChange) -> Optional[str]:
        """Set the MIG mode, resetting the GPU when allowed. None: effective; "reset" or "reboot": still pending."""
        self.write(mode_command(change))
        current, pending_mode = self.mode_of(change.index)
        wanted = change.after["mig_enabled"]
        if current != wanted and pending_mode == wanted:
            if not self.mod.params["gpu_reset"]:
                return "reset"
            self.write(reset_command(change.index), fail=False)
            current, pending_mode = self.mode_of(change.index)
            return "reboot" if current != wanted else None
        if current != wanted:
            self.fail_midway("GPU %d: MIG mode is %s after nvidia-smi -mig %d" % (
                change.index, "enabled" if current else "disabled", int(wanted)))
        return None
