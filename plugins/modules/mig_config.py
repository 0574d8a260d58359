#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

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
notes:
  - Profiles are GPU-instance profiles such as V(1g.10gb), V(3g.40gb) or V(1g.10gb+me); every GPU
    instance gets its default compute instance.
  - GPUs that no item of the selected config matches are left untouched, as mig-parted does.
seealso:
  - module: gpufleet.sharing.gpu_facts
  - name: nvidia-mig-parted
    description: NVIDIA's MIG partition editor, whose v1 config format this module reads.
    link: https://github.com/NVIDIA/mig-parted
extends_documentation_fragment: []
attributes:
  check_mode:
    support: full
    description: Computes and reports the changes (and the diff) without running any mutating command.
  diff_mode:
    support: full
    description: Shows the per-GPU MIG mode and layout before and after.
  platform:
    support: full
    platforms: posix
    description: Linux hosts with the NVIDIA driver (C(nvidia-smi)).
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
"""

import json
import os
import stat
import tempfile

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from ansible_collections.gpufleet.sharing.plugins.module_utils._mig_parted import (
    MigPartedError,
    clear_commands,
    create_command,
    current_layout,
    merged_configs,
    mode_command,
    parse_config,
    plan_host,
    render_yaml,
    busy_problems,
)
from ansible_collections.gpufleet.sharing.plugins.module_utils._nvidia_smi import (
    NO_COMPUTE_INSTANCES,
    NO_GPU_INSTANCES,
    NO_MIG_ENABLED,
    QUERY_ARGV,
    ParseError,
    build_gpu_facts,
    parse_compute_instances,
    parse_gpu_instances,
    parse_query_gpus,
    parse_summary,
)

try:
    import yaml

    HAS_YAML = True
    YAML_IMPORT_ERROR = None
except ImportError as exc:  # pragma: no cover - depends on the managed host
    HAS_YAML = False
    YAML_IMPORT_ERROR = exc

QUERY_MODE_ARGV = ["--query-gpu=index,mig.mode.current,mig.mode.pending", "--format=csv,noheader"]
_EMPTY_LIST_MESSAGES = (NO_GPU_INSTANCES, NO_COMPUTE_INSTANCES, NO_MIG_ENABLED)


class MigConfigRunner:
    """The I/O side: run nvidia-smi / nvidia-mig-parted and feed the pure planner."""

    def __init__(self, module):
        self.module = module
        self.commands = []
        self.smi = module.get_bin_path("nvidia-smi", required=True)
        backend = module.params["backend"]
        self.mig_parted = None
        if backend in ("auto", "nvidia-mig-parted"):
            self.mig_parted = module.get_bin_path("nvidia-mig-parted", required=backend == "nvidia-mig-parted")

    # ------------------------------------------------------------------ reading

    def run_read(self, argv, allow_empty=False):
        rc, out, err = self.module.run_command([self.smi] + list(argv))
        if rc != 0 and not (allow_empty and any(msg in out + err for msg in _EMPTY_LIST_MESSAGES)):
            self.module.fail_json(msg="nvidia-smi %s failed (rc=%d): %s" % (" ".join(argv), rc, (err or out).strip()),
                                  rc=rc, stdout=out, stderr=err)
        return out

    def gather(self):
        """gpu_facts-shaped entries: only the calls the comparison needs (no profile tables)."""
        try:
            rows = parse_query_gpus(self.run_read(QUERY_ARGV))
            summary = parse_summary(self.run_read([]))
            gis = cis = None
            # MIG device UUIDs (-L) are not needed to compare layouts: one call less per run.
            if any(row["mig_current"] for row in rows):
                gis = parse_gpu_instances(self.run_read(["mig", "-lgi"], allow_empty=True))
                cis = parse_compute_instances(self.run_read(["mig", "-lci"], allow_empty=True))
            return build_gpu_facts(rows, summary, None, gis, cis)
        except ParseError as exc:
            self.module.fail_json(msg="could not parse nvidia-smi output: %s" % exc)

    def mode_of(self, index):
        out = self.run_read(["-i", str(index)] + QUERY_MODE_ARGV)
        fields = [f.strip() for f in out.strip().splitlines()[0].split(",")]
        return fields[1] == "Enabled", fields[2] == "Enabled"

    # ------------------------------------------------------------------ writing

    def run_write(self, argv, binary=None, fail=True):
        binary = binary or self.smi
        self.commands.append(" ".join([os.path.basename(binary)] + list(argv)))
        rc, out, err = self.module.run_command([binary] + list(argv))
        if rc != 0 and fail:
            self.fail_midway("%s %s failed (rc=%d): %s" % (os.path.basename(binary), " ".join(argv), rc,
                                                           (err.strip() or out.strip())), rc=rc, stdout=out, stderr=err)
        return rc, out, err

    def fail_midway(self, msg, **extra):
        """A command failed after changes began: report what ran and what the GPUs look like now."""
        now = [current_layout(gpu) for gpu in self.gather()]
        self.module.fail_json(msg=msg, commands=self.commands, after=now, **extra)


def load_document(module):
    params = module.params
    if params["config"] is not None:
        return params["config"], "config"
    if params["config_file"]:
        path = params["config_file"]
        try:
            with open(path, "rb") as handle:
                text = handle.read().decode("utf-8")
        except (IOError, OSError) as exc:
            module.fail_json(msg="cannot read config_file %s: %s" % (path, exc))
        try:
            return json.loads(text), path
        except ValueError:
            pass
        if not HAS_YAML:
            module.fail_json(msg=missing_required_lib("PyYAML", reason="to read the YAML config_file %s" % path),
                             exception=str(YAML_IMPORT_ERROR))
        try:
            return yaml.safe_load(text), path
        except yaml.YAMLError as exc:
            module.fail_json(msg="config_file %s is not valid YAML: %s" % (path, exc))
    return {"version": "v1", "mig-configs": {}}, "defaults"


def build_document(module):
    document, source = load_document(module)
    if module.params["include_defaults"]:
        if not isinstance(document, dict):
            module.fail_json(msg="%s: expected a mapping with 'version' and 'mig-configs'" % source)
        extra = document.get("mig-configs") or {}
        if not isinstance(extra, dict):
            module.fail_json(msg="%s: mig-configs must be a mapping of config name to a list of items" % source)
        merged = merged_configs(extra)
        merged["version"] = document.get("version", "v1")
        unexpected = [key for key in document if key not in ("version", "mig-configs")]
        for key in unexpected:
            merged[key] = document[key]
        document = merged
    return document, source


def apply_with_mig_parted(runner, plan, document):
    """assert, then apply only when needed. Returns (pending GPU indexes, reboot required).

    When apply fails because a GPU reset is not possible (mig-parted: "error resetting all GPUs"),
    the mode change stays pending on those GPUs: that is reported as a required reboot, as the
    nvidia-mig-manager service would reboot; any other failure fails the task.
    """
    params = runner.module.params
    config_path = params["config_file"]
    if params["config"] is not None or params["include_defaults"] or not config_path:
        config_path = os.path.join(runner.module.tmpdir, "mig-parted-config.yaml")
        with open(config_path, "w") as handle:
            handle.write(render_yaml(document))
    base = ["-f", config_path, "-c", plan.config_name]
    rc, out, err = runner.module.run_command([runner.mig_parted, "assert"] + base)
    if rc == 0:
        return [], False
    argv = ["apply"] + base
    if params["hooks_file"]:
        argv += ["-k", params["hooks_file"]]
    if not params["gpu_reset"]:
        argv.append("--skip-reset")
    rc, out, err = runner.run_write(argv, binary=runner.mig_parted, fail=False)
    if rc == 0:
        return [], False
    changed = set(change.index for change in plan.changes)
    pending = [current_layout(gpu)["index"] for gpu in runner.gather()
               if int(gpu["index"]) in changed and gpu["mig"]["current"] != gpu["mig"]["pending"]]
    if pending and params["gpu_reset"]:
        runner.module.warn("nvidia-mig-parted could not reset GPU(s) %s: %s" % (
            ", ".join(str(i) for i in pending), (err.strip() or out.strip())))
        return pending, True
    runner.fail_midway("nvidia-mig-parted %s failed (rc=%d): %s" % (" ".join(argv), rc, (err.strip() or out.strip())),
                       rc=rc, stdout=out, stderr=err)
    return [], False


def apply_with_nvidia_smi(runner, plan):
    """Per changed GPU: destroy CIs then GIs, set the mode, reset if needed, create GIs + CIs."""
    pending = []
    reboot_required = False
    for change in plan.changes:
        for argv in clear_commands(change):
            runner.run_write(argv)
        if change.mode_change:
            runner.run_write(mode_command(change))
            current, pending_mode = runner.mode_of(change.index)
            wanted = change.after["mig_enabled"]
            if current != wanted and pending_mode == wanted:
                if not runner.module.params["gpu_reset"]:
                    pending.append(change.index)
                    continue
                rc, out, err = runner.run_write(["--gpu-reset", "-i", str(change.index)], fail=False)
                current, pending_mode = runner.mode_of(change.index)
                if current != wanted:
                    pending.append(change.index)
                    reboot_required = True
                    continue
            elif current != wanted:
                runner.fail_midway("GPU %d: MIG mode is %s after nvidia-smi -mig %d" % (
                    change.index, "enabled" if current else "disabled", int(wanted)))
        argv = create_command(change)
        if argv:
            runner.run_write(argv)
    return pending, reboot_required


FILE_MODE = 0o644
DIR_MODE = 0o755
OVERRIDE_TEMPLATE = (
    "# Managed by gpufleet.sharing.mig_config: the config nvidia-mig-manager.service applies at boot.\n"
    "[Service]\n"
    "Environment=\"MIG_PARTED_SELECTED_CONFIG=%s\"\n"
)


def read_file_state(path, wanted):
    """(current text or None, whether content or mode differ)."""
    try:
        with open(path, "rb") as handle:
            current = handle.read().decode("utf-8", "replace")
        mode = stat.S_IMODE(os.stat(path).st_mode)
    except (IOError, OSError):
        return None, True
    return current, current != wanted or mode != FILE_MODE


def write_file(module, path, text):
    directory = os.path.dirname(path) or "."
    try:
        if not os.path.isdir(directory):
            os.makedirs(directory, DIR_MODE)
        handle, temp_path = tempfile.mkstemp(prefix=".mig_config.", dir=directory)
        with os.fdopen(handle, "wb") as temp:
            temp.write(text.encode("utf-8"))
        os.chmod(temp_path, FILE_MODE)
        module.atomic_move(temp_path, path)
        os.chmod(path, FILE_MODE)
    except (IOError, OSError) as exc:
        module.fail_json(msg="cannot write %s: %s" % (path, exc))


def main():
    module = AnsibleModule(
        argument_spec=dict(
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
        ),
        mutually_exclusive=[("config", "config_file")],
        required_one_of=[("config", "config_file", "include_defaults")],
        supports_check_mode=True,
    )
    document, source = build_document(module)
    try:
        config = parse_config(document, source)
    except MigPartedError as exc:
        module.fail_json(msg="invalid mig-parted config: %s" % exc, problems=exc.problems)
    config_yaml = render_yaml(config.as_dict())

    runner = MigConfigRunner(module)
    gpus = runner.gather()
    try:
        plan = plan_host(config, module.params["selected"], gpus)
    except MigPartedError as exc:
        module.fail_json(msg="MIG config %s cannot be applied on this host: %s" % (module.params["selected"] or "", exc),
                         problems=exc.problems, before=[current_layout(gpu) for gpu in gpus])

    changes = plan.changes
    result = dict(
        changed=bool(changes),
        selected=plan.config_name,
        backend="none",
        changed_gpus=[change.index for change in changes],
        before=list(plan.before),
        after=list(plan.after),
        reset_required=False,
        reboot_required=False,
        pending_gpus=[],
        commands=[],
        check_mode=module.check_mode,
        config_yaml=config_yaml,
    )
    wanted_files = []
    if module.params["config_dest"]:
        wanted_files.append((module.params["config_dest"], config_yaml))
    if module.params["selected_config_override"]:
        wanted_files.append((module.params["selected_config_override"], OVERRIDE_TEMPLATE % plan.config_name))
    file_states = [(path, text) + read_file_state(path, text) for path, text in wanted_files]
    result["files"] = [dict(path=path, changed=differs) for path, _text, _current, differs in file_states]
    files_changed = any(differs for _path, _text, _current, differs in file_states)
    differs_by_path = dict((path, differs) for path, _text, _current, differs in file_states)
    result["config_dest_changed"] = differs_by_path.get(module.params["config_dest"], False)
    result["selected_config_override_changed"] = differs_by_path.get(module.params["selected_config_override"], False)
    result["changed"] = bool(changes) or files_changed
    if module._diff:
        gpu_diff = dict(
            before={"gpus": [layout for layout in plan.before if layout["index"] in result["changed_gpus"]]},
            after={"gpus": [layout for layout in plan.after if layout["index"] in result["changed_gpus"]]},
            before_header="MIG state (selected config %s)" % plan.config_name,
            after_header="MIG state (selected config %s)" % plan.config_name,
        )
        result["diff"] = [gpu_diff] + [
            dict(before=current or "", after=text, before_header=path, after_header=path)
            for path, text, current, differs in file_states if differs
        ]
    if not result["changed"]:
        module.exit_json(**result)

    busy = busy_problems(gpus, result["changed_gpus"])
    if busy and not module.params["allow_busy"]:
        module.fail_json(
            msg="refusing to reconfigure busy GPUs (set allow_busy=true to override): %s" % "; ".join(busy),
            busy=busy, **dict((k, v) for k, v in result.items() if k != "changed"))
    if module.check_mode:
        module.exit_json(**result)
    if not changes:
        for path, text, _current, differs in file_states:
            if differs:
                write_file(module, path, text)
        module.exit_json(**result)

    if runner.mig_parted:
        result["backend"] = "nvidia-mig-parted"
        pending, reboot_required = apply_with_mig_parted(runner, plan, config.as_dict())
    else:
        result["backend"] = "nvidia-smi"
        pending, reboot_required = apply_with_nvidia_smi(runner, plan)

    now = runner.gather()
    after = [current_layout(gpu) for gpu in now]
    result.update(after=after, commands=runner.commands)
    still_pending = set(gpu["index"] for gpu in after
                        if gpu["index"] in result["changed_gpus"] and gpu["mig_enabled"] != gpu["mig_pending"])
    pending = sorted(set(pending) | still_pending)
    result.update(pending_gpus=pending, reset_required=bool(pending), reboot_required=reboot_required)
    wanted = dict((layout["index"], layout) for layout in plan.after)
    mismatched = []
    for layout in after:
        if layout["index"] not in result["changed_gpus"] or layout["index"] in pending:
            continue
        expected = wanted[layout["index"]]
        if (layout["mig_enabled"], layout["mig_devices"]) != (expected["mig_enabled"], expected["mig_devices"]):
            mismatched.append("GPU %d: expected MIG %s %s, found MIG %s %s" % (
                layout["index"], "on" if expected["mig_enabled"] else "off", expected["mig_devices"],
                "on" if layout["mig_enabled"] else "off", layout["mig_devices"]))
    if mismatched:
        module.fail_json(msg="MIG layout not as requested after applying: %s" % "; ".join(mismatched), **result)
    for path, text, _current, differs in file_states:
        if differs:
            write_file(module, path, text)
    if module._diff:
        result["diff"][0]["after"] = {"gpus": [layout for layout in after if layout["index"] in result["changed_gpus"]]}
    module.exit_json(**result)


if __name__ == "__main__":
    main()
