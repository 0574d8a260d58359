# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What mig_config does to a host, decided without touching it. Pure logic, no I/O.

The whole-host plan (every GPU validated against its own model before anything changes), the
nvidia-smi commands per GPU, the document with the default configs, the files to write, the
result and diff, the check of the GPUs after applying, and the nvidia-ctk commands that regenerate
the management CDI spec after a change. ``_mig_host`` runs the commands and
writes the files; the module glues the two.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.gpufleet.sharing.plugins.module_utils.base._changes import diff_entry
from ansible_collections.gpufleet.sharing.plugins.module_utils.gpu._mig_catalog import CatalogError, GpuModel, resolve_model
from ansible_collections.gpufleet.sharing.plugins.module_utils.mig._mig_parted import (
    DesiredGpu,
    DocumentError,
    MigPartedConfig,
    MigPartedError,
    current_layout,
    desired_layout,
    desired_state,
    merged_configs,
    select_config,
    selects_no_gpu_problem,
)
from ansible_collections.gpufleet.sharing.plugins.module_utils.mig._mig_planner import LayoutError, board_naming_problems, plan_layout

FILE_MODE = 0o644
DIR_MODE = 0o755
OVERRIDE_TEMPLATE = (
    "# Managed by gpufleet.sharing.mig_config: the config nvidia-mig-manager.service applies at boot.\n"
    "[Service]\n"
    "Environment=\"MIG_PARTED_SELECTED_CONFIG=%s\"\n"
)
DOCUMENT_KEYS = ("version", "mig-configs")
MANAGEMENT_CDI_SPEC = "/var/run/cdi/management.nvidia.com-gpu.yaml"

Layout = Dict[str, Any]  # current_layout(): index, uuid, name, mig_capable/enabled/pending, mig_devices, mig_profiles


# ---------------------------------------------------------------------------------------------
# Whole-host plan: validate everything first, then say what changes on which GPU


@dataclass(frozen=True)
class GpuChange:
    """One GPU the selected config addresses: its before/after state and what must happen."""

    index: int
    uuid: Optional[str]
    model: Optional[str]
    before: Layout
    after: Layout
    mode_change: bool
    layout_change: bool
    creation_order: Tuple[str, ...] = ()
    had_instances: bool = False

    @property
    def changed(self) -> bool:
        return self.mode_change or self.layout_change


@dataclass(frozen=True)
class HostPlan:
    config_name: str
    gpus: Tuple[GpuChange, ...]
    before: Tuple[Layout, ...]
    after: Tuple[Layout, ...]

    @property
    def changes(self) -> Tuple[GpuChange, ...]:
        return tuple(gpu for gpu in self.gpus if gpu.changed)


def needs_change(current: Mapping[str, Any], desired: DesiredGpu) -> Dict[str, bool]:
    """Which parts differ: ``mode`` (current or pending mode) and ``layout`` (instances)."""
    mode = current["mig_enabled"] != desired.mig_enabled or current["mig_pending"] != desired.mig_enabled
    wanted_devices = desired.mig_devices if desired.mig_enabled else {}
    layout = dict(current["mig_devices"]) != dict(wanted_devices)
    return {"mode": mode, "layout": layout}


def plan_host(config: MigPartedConfig, selected: Optional[str], gpus: Sequence[Mapping[str, Any]]) -> HostPlan:
    """Validate the selected config for every GPU of the host and compute the changes.

    Every layout is checked against the catalog and the planner for the GPU's own model before
    anything is planned; all problems are reported together (GPU index, product, model, profile and
    the planner's reason, which names the valid profiles).
    """
    name, items = select_config(config, selected)
    desired = desired_state(items, gpus, name)
    problems: List[str] = []
    capable = [gpu for gpu in gpus if (gpu.get("mig") or {}).get("capable")]
    if capable and not desired:  # mig-parted would leave every GPU untouched and report success
        problems.append(selects_no_gpu_problem(name, capable))
    changes: List[GpuChange] = []
    before_all: List[Layout] = []
    after_all: List[Layout] = []
    for gpu in sorted(gpus, key=lambda g: int(g["index"])):
        before = current_layout(gpu)
        wanted = desired.get(before["index"])
        before_all.append(before)
        after_all.append(desired_layout(before, wanted))
        if wanted is not None:
            change = _gpu_change(gpu, name, before, after_all[-1], wanted, problems)
            if change is not None:
                changes.append(change)
    if problems:
        raise MigPartedError(problems)
    return HostPlan(config_name=name, gpus=tuple(changes), before=tuple(before_all), after=tuple(after_all))


def _gpu_change(gpu: Mapping[str, Any], name: str, before: Layout, after: Layout, wanted: DesiredGpu,
                problems: List[str]) -> Optional[GpuChange]:
    """The change of one addressed GPU, or None after adding its problems to ``problems``."""
    index = before["index"]
    product = gpu.get("name") or "unknown product"
    model: Optional[GpuModel] = None
    order: Tuple[str, ...] = ()
    try:
        model = resolve_model(str(gpu.get("name") or ""), gpu.get("pci_device_id"))
    except CatalogError as exc:
        if wanted.mig_enabled:
            problems.append("GPU %d (%s): %s" % (index, product, exc))
            return None
    if wanted.mig_enabled and model is not None:
        where = "GPU %d (%s, model %s)" % (index, product, model.key)
        try:
            order = plan_layout(model, wanted.mig_devices).creation_order
        except LayoutError as exc:
            problems.extend("%s, config %s: %s" % (where, name, problem) for problem in exc.problems)
            return None
        naming = board_naming_problems(model, before["mig_devices"], wanted.mig_devices)
        if naming:
            problems.extend("%s, config %s: %s" % (where, name, problem) for problem in naming)
            return None
    change = needs_change(before, wanted)
    return GpuChange(
        index=index, uuid=gpu.get("uuid"), model=model.key if model else None, before=before, after=after,
        mode_change=change["mode"], layout_change=change["layout"], creation_order=order,
        had_instances=bool(before["mig_devices"]),
    )


def busy_problems(gpus: Sequence[Mapping[str, Any]], indexes: Iterable[int]) -> List[str]:
    """One line per GPU among ``indexes`` with compute processes: index, uuid and PIDs."""
    wanted = set(indexes)
    lines = []
    for gpu in gpus:
        if int(gpu["index"]) not in wanted:
            continue
        pids = sorted({int(proc["pid"]) for proc in gpu.get("processes") or [] if proc.get("pid") is not None})
        if pids:
            lines.append("GPU %s (%s) has compute processes running: PIDs %s" % (
                gpu["index"], gpu.get("uuid"), ", ".join(str(p) for p in pids)))
    return lines


# ---------------------------------------------------------------------------------------------
# Commands (argv without the binary)


def clear_commands(change: GpuChange) -> List[List[str]]:
    """nvidia-smi argv destroying a GPU's CIs, then its GIs (docs/reference/specs.md §4.6)."""
    if not change.had_instances or not change.before["mig_enabled"]:
        return []
    index = str(change.index)
    return [["mig", "-i", index, "-dci"], ["mig", "-i", index, "-dgi"]]


def mode_command(change: GpuChange) -> List[str]:
    return ["-i", str(change.index), "-mig", "1" if change.after["mig_enabled"] else "0"]


def reset_command(index: int) -> List[str]:
    return ["--gpu-reset", "-i", str(index)]


def create_command(change: GpuChange) -> List[str]:
    """``-cgi`` with explicit ``profile:start`` tuples in the planner's order, ``-C`` for default CIs."""
    if not change.after["mig_enabled"] or not change.creation_order:
        return []
    return ["mig", "-i", str(change.index), "-cgi", ",".join(change.creation_order), "-C"]


def mig_parted_commands(config_path: str, config_name: str, hooks_file: Optional[str],
                        gpu_reset: bool) -> Tuple[List[str], List[str]]:
    """nvidia-mig-parted ``assert`` and ``apply`` argv for the selected config."""
    base = ["-f", config_path, "-c", config_name]
    apply = ["apply"] + base
    if hooks_file:
        apply += ["-k", hooks_file]
    if not gpu_reset:
        apply.append("--skip-reset")
    return ["assert"] + base, apply


# ---------------------------------------------------------------------------------------------
# The document and the files


def document_with_defaults(document: Any, source: str) -> Dict[str, Any]:
    """The default named configs plus the document's own (which win); other top-level keys are kept
    so that validation still names them."""
    if not isinstance(document, dict):
        raise DocumentError("%s: expected a mapping with 'version' and 'mig-configs'" % source)
    extra = document.get("mig-configs") or {}
    if not isinstance(extra, dict):
        raise DocumentError("%s: mig-configs must be a mapping of config name to a list of items" % source)
    merged = merged_configs(extra)
    merged["version"] = document.get("version", "v1")
    for key in document:
        if key not in DOCUMENT_KEYS:
            merged[key] = document[key]
    return merged


@dataclass(frozen=True)
class FileState:
    """One file mig_config maintains: the wanted text, what is there now, whether it differs."""

    path: str
    text: str
    current: Optional[str]
    differs: bool


def file_state(path: str, text: str, current: Optional[str], mode: Optional[int]) -> FileState:
    """``current``/``mode`` as read from the host (None: missing or unreadable)."""
    return FileState(path, text, current, current is None or current != text or mode != FILE_MODE)


def wanted_files(config_dest: Optional[str], override: Optional[str], config_name: str,
                 config_yaml: str) -> List[Tuple[str, str]]:
    """(path, text) of the config file and the systemd drop-in, for the options that are set."""
    files = []
    if config_dest:
        files.append((config_dest, config_yaml))
    if override:
        files.append((override, OVERRIDE_TEMPLATE % config_name))
    return files


# ---------------------------------------------------------------------------------------------
# Result and diff


def plan_result(plan: HostPlan, files: Sequence[FileState], config_yaml: str, check_mode: bool,
                config_dest: Optional[str], override: Optional[str]) -> Dict[str, Any]:
    """The module's result before anything runs (after = the planned state)."""
    differs = dict((state.path, state.differs) for state in files)
    return dict(
        changed=bool(plan.changes) or any(state.differs for state in files),
        selected=plan.config_name,
        backend="none",
        changed_gpus=[change.index for change in plan.changes],
        before=list(plan.before),
        after=list(plan.after),
        reset_required=False,
        reboot_required=False,
        pending_gpus=[],
        commands=[],
        check_mode=check_mode,
        config_yaml=config_yaml,
        files=[dict(path=state.path, changed=state.differs) for state in files],
        config_dest_changed=differs.get(config_dest, False),
        selected_config_override_changed=differs.get(override, False),
    )


def gpus_side(layouts: Iterable[Layout], changed_gpus: Sequence[int]) -> Dict[str, List[Layout]]:
    """One side of the GPU diff: the layouts of the changed GPUs."""
    return {"gpus": [layout for layout in layouts if layout["index"] in changed_gpus]}


def plan_diff(plan: HostPlan, changed_gpus: Sequence[int], files: Sequence[FileState]) -> List[Dict[str, Any]]:
    """The GPU entry first (always, empty when no GPU changes), then one entry per differing file."""
    header = "MIG state (selected config %s)" % plan.config_name
    gpu_diff = diff_entry(header, gpus_side(plan.before, changed_gpus), gpus_side(plan.after, changed_gpus))
    return [gpu_diff] + [diff_entry(state.path, state.current or "", state.text) for state in files if state.differs]


# ---------------------------------------------------------------------------------------------
# After applying


def pending_gpus(after: Sequence[Layout], changed_gpus: Sequence[int], pending: Iterable[int]) -> List[int]:
    """``pending`` plus every changed GPU whose MIG mode change is still pending, sorted."""
    still = set(layout["index"] for layout in after
                if layout["index"] in changed_gpus and layout["mig_enabled"] != layout["mig_pending"])
    return sorted(set(pending) | still)


def stray_pending_changes(plan: HostPlan) -> List[GpuChange]:
    """Changed GPUs already in the planned MIG mode with a change away from it pending. nvidia-mig-parted
    v0.15.0 asserts the current mode only (cmd/nvidia-mig-parted/assert/mode.go) and leaves such a change as it
    is, and a GPU reset or a reboot would make it effective; setting the planned mode again undoes it."""
    return [change for change in plan.changes
            if change.before["mig_enabled"] == change.after["mig_enabled"] != change.before["mig_pending"]]


def stray_pending_problems(plan: HostPlan, after: Sequence[Layout]) -> List[str]:
    """One line per GPU of ``stray_pending_changes(plan)`` on which that change is still pending in ``after``."""
    now = dict((layout["index"], layout) for layout in after)
    problems = []
    for change in stray_pending_changes(plan):
        layout, wanted = now.get(change.index), bool(change.after["mig_enabled"])
        if layout is not None and layout["mig_enabled"] == wanted and layout["mig_pending"] != wanted:
            problems.append("GPU %d: MIG is %s as planned, but a change to MIG %s is still pending after nvidia-smi %s "
                            "(a GPU reset or a reboot would turn MIG %s)" % (
                                change.index, _on(wanted), _on(not wanted), " ".join(mode_command(change)), _on(not wanted)))
    return problems


def _on(enabled: bool) -> str:
    return "on" if enabled else "off"


def layout_mismatches(plan: HostPlan, after: Sequence[Layout], changed_gpus: Sequence[int],
                      pending: Sequence[int]) -> List[str]:
    """One line per changed GPU (not left pending) whose mode or layout is not the planned one."""
    wanted = dict((layout["index"], layout) for layout in plan.after)
    mismatched = []
    for layout in after:
        if layout["index"] not in changed_gpus or layout["index"] in pending:
            continue
        expected = wanted[layout["index"]]
        if (layout["mig_enabled"], layout["mig_devices"]) != (expected["mig_enabled"], expected["mig_devices"]):
            mismatched.append("GPU %d: expected MIG %s %s, found MIG %s %s" % (
                layout["index"], "on" if expected["mig_enabled"] else "off", expected["mig_devices"],
                "on" if layout["mig_enabled"] else "off", layout["mig_devices"]))
    return mismatched


def reset_failed_gpus(plan: HostPlan, gpus_now: Sequence[Mapping[str, Any]]) -> List[int]:
    """Changed GPUs whose mode change stayed pending after a failed nvidia-mig-parted apply."""
    changed = set(change.index for change in plan.changes)
    return [current_layout(gpu)["index"] for gpu in gpus_now
            if int(gpu["index"]) in changed and gpu["mig"]["current"] != gpu["mig"]["pending"]]


# ---------------------------------------------------------------------------------------------
# The management CDI spec after a change (docs/reference/specs.md §7.7)


@dataclass(frozen=True)
class CdiDecision:
    """Whether to regenerate after the change, and what to say (warning) or refuse (error) before it."""

    refresh: bool
    warning: Optional[str] = None
    error: Optional[str] = None


def cdi_refresh_commands(ctk: str) -> List[List[str]]:
    """What NVIDIA's MIG manager runs after a change when CDI is enabled: the control device nodes, then the
    management spec (it lists the device nodes, MIG capabilities included, that exist when it is generated)."""
    return [[ctk, "system", "create-device-nodes", "--control-devices"],
            [ctk, "cdi", "generate", "--mode=management", "--vendor=management.nvidia.com", "--class=gpu",
             "--output=" + MANAGEMENT_CDI_SPEC]]


def cdi_command_lines(commands: Sequence[Sequence[str]]) -> List[str]:
    """As the module's ``commands`` logs them: the binary's name and the arguments."""
    return [" ".join([argv[0].rsplit("/", 1)[-1]] + list(argv[1:])) for argv in commands]


def cdi_refresh_decision(mode: str, ctk: str, exists: bool) -> CdiDecision:
    """cdi_refresh (auto, true, false) for a run that changes GPUs, given whether ``ctk`` exists on the host."""
    if mode == "false":
        return CdiDecision(False)
    if exists:
        return CdiDecision(True)
    if mode == "true":
        return CdiDecision(False, error=(
            "cdi_refresh=true but %s (nvidia_ctk_binary) does not exist: the management CDI spec could not be "
            "regenerated after the MIG change, so nothing was changed. Install the NVIDIA Container Toolkit, point "
            "nvidia_ctk_binary at nvidia-ctk, or set cdi_refresh to auto or false." % ctk))
    return CdiDecision(False, warning=(
        "%s not found: the management CDI spec is not regenerated after the MIG change (cdi_refresh=auto). "
        "A host that uses CDI needs `nvidia-ctk cdi generate --mode=management` run there." % ctk))
