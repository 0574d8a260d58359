#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)


DOCUMENTATION = r"""
---
module: mig_config
short_description: Declarative MIG mode and layout of the NVIDIA GPUs of a host
version_added: 0.1.0
description:
  - Brings the MIG mode and the GPU/compute instances of every GPU of the host to the state that a
    named config in nvidia-mig-parted's version V(v1) config format asks for.
  - The whole config is validated first, for every GPU of the host, against the MIG catalog of the
    GPU's model (profiles, maximum counts, placements). Any problem fails the task before anything
    is changed, naming the GPU index, product, model, profile and the valid profiles.
  - GPUs with running compute processes are never reconfigured unless O(allow_busy=true); the
    error lists every such GPU with its UUID and the PIDs.
  - Uses C(nvidia-mig-parted) when it is installed (C(assert) first, C(apply) only when needed),
    otherwise C(nvidia-smi), creating GPU instances with explicit placements in an order that
    always succeeds.
  - Does not reboot. When a MIG mode change stays pending (GPU reset not possible or not allowed)
    the module reports RV(reset_required) / RV(reboot_required) and leaves that GPU's instances
    alone; the P(gpufleet.sharing.mig#role) role decides whether to reboot.
  - A change pending away from the requested mode on a GPU already in it (MIG on as requested, a change
    to MIG off pending) is undone by setting the requested mode again with C(nvidia-smi -i <gpu> -mig),
    also after C(nvidia-mig-parted), which judges the current mode only (v0.15.0) and leaves it pending;
    a reset or a reboot would make it effective. When it is still pending afterwards the task fails
    naming the GPU; it is never reported as RV(reset_required).
author:
  - gpufleet maintainers (@gpufleet)
options:
  config:
    description:
      - The mig-parted config document, inline, with C(version) and C(mig-configs) keys.
      - Mutually exclusive with O(config_file).
    type: dict
  config_file:
    description:
      - Path of a mig-parted config file (YAML or JSON) on the managed host.
      - Mutually exclusive with O(config).
    type: path
  selected:
    description:
      - Name of the config under C(mig-configs) to apply.
      - May be omitted when the document holds exactly one config.
    type: str
  include_defaults:
    description:
      - Add the default named configs (V(all-disabled), V(all-enabled), V(all-balanced) and
        V(all-<profile>) for every GPU model of the catalog) to the document. Names in the
        document win over the defaults.
      - With this option O(config) and O(config_file) may be omitted.
    type: bool
    default: false
  allow_busy:
    description:
      - Reconfigure GPUs even when compute processes run on them.
      - Those processes lose their GPU. Off by default.
    type: bool
    default: false
  backend:
    description:
      - V(auto) uses C(nvidia-mig-parted) when it is found and C(nvidia-smi) otherwise.
    type: str
    choices: [auto, nvidia-mig-parted, nvidia-smi]
    default: auto
  gpu_reset:
    description:
      - Allow a GPU reset to make a pending MIG mode change effective. When V(false), a pending
        change is reported in RV(reset_required) and the GPU's instances are left alone.
      - With C(nvidia-mig-parted), V(false) passes C(--skip-reset).
    type: bool
    default: true
  hooks_file:
    description:
      - mig-parted hooks file passed with C(--hooks-file). Used by the C(nvidia-mig-parted) backend only.
    type: path
  config_dest:
    description:
      - Also write the whole config document (defaults included when requested), rendered as
        mig-parted YAML, to this path, for example C(/etc/nvidia-mig-manager/config.yaml), the file
        C(nvidia-mig-manager.service) reads at boot. Mode C(0644); a missing parent directory is
        created with mode C(0755).
      - Written only after the GPUs have the requested layout; never in check mode.
    type: path
  selected_config_override:
    description:
      - Also write a systemd drop-in that sets C(MIG_PARTED_SELECTED_CONFIG) to the selected config,
        for example C(/etc/systemd/system/nvidia-mig-manager.service.d/override.conf), so that
        C(nvidia-mig-manager.service) applies the same config after a reboot (what mig-parted's
        C(apply-start) hook does). The caller runs C(systemctl daemon-reload) when RV(files) says it changed.
      - Same mode, directory and timing rules as O(config_dest).
    type: path
  plan:
    description:
      - A plan this module returned (RV(plan)), or that the P(gpufleet.sharing.rollout_triage#filter) filter
        computed on the controller with this module's code from a read of the host.
      - The GPUs are read again in any case (busy GPUs are refused as always). When they are still in the
        state the plan was made from, and the config document and O(selected) are the plan's, the plan is
        applied as it is, without planning again (RV(plan_reused)); otherwise the host is planned again
        from what it is now, never changed from a stale plan.
      - A value that is not such a plan fails the task before anything changes.
    type: dict
  cdi_refresh:
    description:
      - After a run that changed GPUs, regenerate the host's management CDI spec the way NVIDIA's MIG manager
        does when CDI is enabled - C(nvidia-ctk system create-device-nodes --control-devices), then
        C(nvidia-ctk cdi generate --mode=management --vendor=management.nvidia.com --class=gpu
        --output=/var/run/cdi/management.nvidia.com-gpu.yaml). The spec lists the device nodes (the MIG
        instances' included) that existed when it was generated, so after a change it names the old ones.
      - Decided before anything changes, only when GPUs change (or O(cdi_refresh_due)). V(true) fails the task
        when O(nvidia_ctk_binary) does not exist, naming it; V(auto) then skips the refresh with a warning;
        V(false) never does it.
      - The commands run after the GPUs and the files, and only when no MIG mode change is left pending
        (RV(reset_required)); then the refresh is deferred to the run that completes the change
        (RV(cdi_refresh_due)). A failing command fails the task with its output. In check mode nothing runs
        and RV(cdi_commands) says what would.
    type: str
    choices: [auto, "true", "false"]
    default: "false"
  nvidia_ctk_binary:
    description: Path of C(nvidia-ctk) on the host (NVIDIA Container Toolkit), for O(cdi_refresh).
    type: path
    default: /usr/bin/nvidia-ctk
  cdi_refresh_due:
    description:
      - An earlier run changed the GPUs and left a MIG mode change pending (its RV(cdi_refresh_due)), and the
        host was rebooted since; this run regenerates the management CDI spec as O(cdi_refresh) says even when it
        changes no GPU itself. The P(gpufleet.sharing.mig#role) role sets it on its apply after a reboot.
    type: bool
    default: false
notes:
  - Profiles are GPU-instance profiles such as V(1g.10gb), V(3g.40gb) or V(1g.10gb+me); every GPU
    instance gets its default compute instance.
  - GPUs that no item of the selected config matches are left untouched, as mig-parted does.
seealso:
  - module: gpufleet.sharing.gpu_facts
  - name: nvidia-mig-parted
    description: NVIDIA's MIG partition editor, whose v1 config format this module reads.
    link: https://github.com/NVIDIA/mig-parted
extends_documentation_fragment:
  - gpufleet.sharing.attributes.HOST
attributes:
  diff_mode:
    description: Shows the per-GPU MIG mode and layout, and the files, before and after.
requirements:
  - nvidia-smi (NVIDIA driver R470 or later) on the managed host
  - PyYAML on the managed host when O(config_file) is a YAML file
"""

EXAMPLES = r"""
- name: Balanced MIG layout on every GPU, from mig-parted's default names
  gpufleet.sharing.mig_config:
    include_defaults: true
    selected: all-balanced

- name: A custom layout for the H100 GPUs of this host, MIG off on the others
  gpufleet.sharing.mig_config:
    selected: inference
    config:
      version: v1
      mig-configs:
        inference:
          - device-filter: ["0x233010DE"]
            devices: all
            mig-enabled: true
            mig-devices:
              3g.40gb: 1
              2g.20gb: 1
              1g.10gb: 2
          - device-filter: ["0x20B010DE"]
            devices: all
            mig-enabled: false

- name: Apply a named config from the file nvidia-mig-manager uses
  gpufleet.sharing.mig_config:
    config_file: /etc/nvidia-mig-manager/config.yaml
    selected: all-1g.10gb
  register: mig

- name: Apply, then regenerate the management CDI spec as NVIDIA's MIG manager does (when nvidia-ctk exists)
  gpufleet.sharing.mig_config:
    include_defaults: true
    selected: all-1g.10gb
    cdi_refresh: auto
    nvidia_ctk_binary: /usr/bin/nvidia-ctk

- name: Preview the change (nothing is touched)
  gpufleet.sharing.mig_config:
    include_defaults: true
    selected: all-disabled
  check_mode: true
  diff: true
"""

RETURN = r"""
selected:
  description: Name of the config that was applied.
  returned: always
  type: str
  sample: all-balanced
backend:
  description: Tool used to change the GPUs; V(none) when nothing had to change or in check mode.
  returned: always
  type: str
  sample: nvidia-smi
changed_gpus:
  description: Indexes of the GPUs whose MIG mode or layout changed (or would change in check mode).
  returned: always
  type: list
  elements: int
  sample: [0, 1]
before:
  description: Per GPU, the MIG state before the task.
  returned: always
  type: list
  elements: dict
  contains:
    index:
      description: GPU index.
      type: int
    uuid:
      description: GPU UUID.
      type: str
    name:
      description: Product name.
      type: str
    mig_capable:
      description: Whether the GPU supports MIG.
      type: bool
    mig_enabled:
      description: Current MIG mode.
      type: bool
    mig_pending:
      description: Pending MIG mode (effective after a GPU reset or reboot).
      type: bool
    mig_devices:
      description: Profile to instance count.
      type: dict
    mig_profiles:
      description: Sorted list of the profiles of all instances (one entry per instance).
      type: list
      elements: str
  sample:
    - index: 0
      uuid: GPU-b4895dbf-9350-2524-a89b-98161ddd9fe4
      name: NVIDIA H100 80GB HBM3
      mig_capable: true
      mig_enabled: false
      mig_pending: false
      mig_devices: {}
      mig_profiles: []
after:
  description: Per GPU, the MIG state after the task (in check mode, the state it would have). Same fields as RV(before).
  returned: always
  type: list
  elements: dict
  sample:
    - index: 0
      uuid: GPU-b4895dbf-9350-2524-a89b-98161ddd9fe4
      name: NVIDIA H100 80GB HBM3
      mig_capable: true
      mig_enabled: true
      mig_pending: true
      mig_devices: {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}
      mig_profiles: ["1g.10gb", "1g.10gb", "2g.20gb", "3g.40gb"]
reset_required:
  description: A MIG mode change is pending on at least one GPU and needs a GPU reset; its instances were not created.
  returned: always
  type: bool
reboot_required:
  description: A GPU reset was attempted and is not possible; only a reboot makes the pending MIG mode effective.
  returned: always
  type: bool
pending_gpus:
  description: Indexes of the GPUs left with a pending MIG mode change.
  returned: always
  type: list
  elements: int
commands:
  description: The mutating commands that were run, in order.
  returned: always
  type: list
  elements: str
  sample: ["nvidia-smi -i 0 -mig 1", "nvidia-smi mig -i 0 -cgi 3g.40gb:4,2g.20gb:2,1g.10gb:0,1g.10gb:1 -C"]
files:
  description: The files of O(config_dest) and O(selected_config_override) and whether each changed (or would change).
  returned: always
  type: list
  elements: dict
  contains:
    path:
      description: File path.
      type: str
    changed:
      description: Content or mode differs from what was requested.
      type: bool
  sample: [{"path": "/etc/nvidia-mig-manager/config.yaml", "changed": false}]
config_dest_changed:
  description: Whether the file of O(config_dest) changed (or would change).
  returned: always
  type: bool
selected_config_override_changed:
  description: Whether the drop-in of O(selected_config_override) changed (or would change); then run C(systemctl daemon-reload).
  returned: always
  type: bool
check_mode:
  description:
    - Whether the module ran in check mode (nothing was changed). Also true when check mode was
      set on the task only, where C(ansible_check_mode) stays false.
  returned: always
  type: bool
config_yaml:
  description: The whole config document (defaults included when requested) rendered as mig-parted YAML.
  returned: always
  type: str
plan:
  description:
    - The plan this run made or reused (per GPU what changes and the order of its instances), bound to the
      config document; give it back as O(plan) to apply it later without planning again.
  returned: always
  type: dict
plan_reused:
  description: The given O(plan) was applied as it is (the GPUs were still in the state it was made from).
  returned: always
  type: bool
cdi_refreshed:
  description: The management CDI spec was regenerated after the change (in check mode, would be); see O(cdi_refresh).
  returned: always
  type: bool
cdi_commands:
  description:
    - The nvidia-ctk commands that regenerated the management CDI spec (in check mode, that would), in order;
      also at the end of RV(commands) when they ran.
  returned: always
  type: list
  elements: str
  sample:
    - nvidia-ctk system create-device-nodes --control-devices
    - >-
      nvidia-ctk cdi generate --mode=management --vendor=management.nvidia.com --class=gpu
      --output=/var/run/cdi/management.nvidia.com-gpu.yaml
cdi_refresh_due:
  description:
    - The management CDI spec is to be regenerated but a MIG mode change is left pending (RV(reset_required)).
      Give it as O(cdi_refresh_due) to the run after the reboot or reset.
  returned: always
  type: bool
"""

from typing import Any, Dict, List, Tuple

# Before the rest of the collection, which needs a newer Python: a clear refusal on an older one.
from ansible_collections.gpufleet.sharing.plugins.module_utils.base._host_python import refuse_older_python
refuse_older_python("gpufleet.sharing.mig_config")

from ansible_collections.gpufleet.sharing.plugins.module_utils.gpu._host import read_file, write_file  # noqa: E402
from ansible_collections.gpufleet.sharing.plugins.module_utils.mig._mig_apply import (  # noqa: E402
    DIR_MODE,
    FILE_MODE,
    CdiDecision,
    FileState,
    HostPlan,
    busy_problems,
    cdi_command_lines,
    cdi_refresh_commands,
    cdi_refresh_decision,
    document_with_defaults,
    file_state,
    gpus_side,
    layout_mismatches,
    pending_gpus,
    plan_diff,
    plan_host,
    plan_result,
    stray_pending_problems,
    wanted_files,
)
from ansible_collections.gpufleet.sharing.plugins.module_utils.mig._mig_given_plan import GivenPlanError, given_plan, plan_to_dict, reusable  # noqa: E402
from ansible_collections.gpufleet.sharing.plugins.module_utils.mig._mig_host import MigHost, read_document  # noqa: E402
from ansible_collections.gpufleet.sharing.plugins.module_utils.mig._mig_parted import (  # noqa: E402
    DocumentError,
    MigPartedConfig,
    current_layout,
    parse_config,
    render_yaml,
)
from ansible_collections.gpufleet.sharing.plugins.module_utils.base._module import GpuFleetModule  # noqa: E402

ARGUMENT_SPEC = dict(
    config=dict(type="dict"),
    config_file=dict(type="path"),
    selected=dict(type="str"),
    include_defaults=dict(type="bool", default=False),
    allow_busy=dict(type="bool", default=False),
    backend=dict(type="str", default="auto", choices=["auto", "nvidia-mig-parted", "nvidia-smi"]),
    gpu_reset=dict(type="bool", default=True),
    hooks_file=dict(type="path"),
    config_dest=dict(type="path"),
    selected_config_override=dict(type="path"),
    plan=dict(type="dict"),
    cdi_refresh=dict(type="str", default="false", choices=["auto", "true", "false"]),
    nvidia_ctk_binary=dict(type="path", default="/usr/bin/nvidia-ctk"),
    cdi_refresh_due=dict(type="bool", default=False),
)


def main() -> None:
    GpuFleetModule(ARGUMENT_SPEC, mutually_exclusive=[("config", "config_file")], required_one_of=[("config", "config_file", "include_defaults")]).run(run)


def run(mod: GpuFleetModule) -> None:
    """Validate everything, refuse busy GPUs, apply, check the result, then write the files."""
    config = read_config(mod)
    config_yaml = render_yaml(config.as_dict())
    host = MigHost(mod)
    gpus = host.gather()
    plan, reused = plan_or_fail(mod, config, config_yaml, gpus)
    params = mod.params
    files = [file_state(path, text, *read_file(path))
             for path, text in wanted_files(params["config_dest"], params["selected_config_override"],
                                            plan.config_name, config_yaml)]
    result = plan_result(plan, files, config_yaml, mod.check_mode, params["config_dest"],
                         params["selected_config_override"])
    result.update(plan=plan_to_dict(plan, config_yaml), plan_reused=reused)
    if mod.diff_mode:
        result["diff"] = plan_diff(plan, result["changed_gpus"], files)
    cdi = cdi_before(mod, host, result["changed_gpus"])
    if result["changed"]:
        busy = busy_problems(gpus, result["changed_gpus"])
        if busy and not params["allow_busy"]:
            mod.fail("refusing to reconfigure busy GPUs (set allow_busy=true to override): %s" % "; ".join(busy),
                     busy=busy, **dict((k, v) for k, v in result.items() if k != "changed"))
        if plan.changes and not mod.check_mode:
            apply(mod, host, plan, config, result)
        if not mod.check_mode:
            write_files(mod, files)
    cdi_after(mod, host, cdi, result)
    mod.result.update(result)


def read_config(mod: GpuFleetModule) -> MigPartedConfig:
    document, source = read_document(mod)
    try:
        with mod.failing_on("invalid mig-parted config"):
            if mod.params["include_defaults"]:
                document = document_with_defaults(document, source)
            config = parse_config(document, source)
    except DocumentError as exc:
        mod.fail(str(exc))
    return config


def plan_or_fail(mod: GpuFleetModule, config: MigPartedConfig, config_yaml: str,
                 gpus: List[Dict[str, Any]]) -> Tuple[HostPlan, bool]:
    """The given plan when the GPUs are still as it was made from (no plan again), else a plan made here."""
    if mod.params["plan"]:
        try:
            given = given_plan(mod.params["plan"])
        except GivenPlanError as exc:
            mod.fail(str(exc))
        if reusable(mod.params["plan"], given, config_yaml, mod.params["selected"], gpus):
            return given, True
    with mod.failing_on("MIG config %s cannot be applied on this host" % (mod.params["selected"] or ""),
                        before=[current_layout(gpu) for gpu in gpus]):
        plan = plan_host(config, mod.params["selected"], gpus)
    return plan, False


def apply(mod: GpuFleetModule, host: MigHost, plan: HostPlan, config: MigPartedConfig, result: Dict[str, Any]) -> None:
    """Run the backend, then read the GPUs again: pending mode changes are reported, anything else
    that is not as planned fails the task (with the whole result)."""
    result["backend"], pending, reboot_required = host.apply(plan, config.as_dict())
    after = [current_layout(gpu) for gpu in host.gather()]
    changed_gpus = result["changed_gpus"]
    pending = pending_gpus(after, changed_gpus, pending)
    result.update(after=after, commands=host.commands, pending_gpus=pending, reset_required=bool(pending),
                  reboot_required=reboot_required)
    mismatched = stray_pending_problems(plan, after) + layout_mismatches(plan, after, changed_gpus, pending)
    if mismatched:
        mod.fail("MIG layout not as requested after applying: %s" % "; ".join(mismatched), **result)
    if mod.diff_mode:
        result["diff"][0]["after"] = gpus_side(after, changed_gpus)


def cdi_before(mod: GpuFleetModule, host: MigHost, changed_gpus: List[int]) -> CdiDecision:
    """Before anything changes: whether the management CDI spec is regenerated after this run (a required
    nvidia-ctk that is missing fails here; a missing one in auto mode is a warning)."""
    params = mod.params
    if params["cdi_refresh"] == "false" or not (changed_gpus or params["cdi_refresh_due"]):
        return CdiDecision(False)
    ctk = params["nvidia_ctk_binary"]
    decision = cdi_refresh_decision(params["cdi_refresh"], ctk, host.exists(ctk))
    if decision.error:
        mod.fail(decision.error)
    if decision.warning:
        mod.warn(decision.warning)
    return decision


def cdi_after(mod: GpuFleetModule, host: MigHost, cdi: CdiDecision, result: Dict[str, Any]) -> None:
    """After the change and its files, nothing left pending: nvidia-ctk's two commands (in check mode, what would
    run). A change left pending defers it to the run that completes it (RV(cdi_refresh_due))."""
    due = cdi.refresh and result["reset_required"]
    result.update(cdi_refreshed=False, cdi_commands=[], cdi_refresh_due=due)
    if not cdi.refresh or due:
        return
    commands = cdi_refresh_commands(mod.params["nvidia_ctk_binary"])
    if not mod.check_mode:
        host.refresh_cdi(commands)
        result["commands"] = host.commands
    result.update(changed=True, cdi_refreshed=True, cdi_commands=cdi_command_lines(commands))


def write_files(mod: GpuFleetModule, files: List[FileState]) -> None:
    for state in files:
        if state.differs:
            write_file(mod, state.path, state.text, FILE_MODE, DIR_MODE, ".mig_config.")


if __name__ == "__main__":
    main()
