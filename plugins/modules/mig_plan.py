#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: mig_plan
short_description: Validate and plan a MIG layout for a GPU model
version_added: 0.1.0
description:
  - Checks that a MIG layout (GPU instance profile and count) can be created on one GPU of a given
    model, and returns the plan - explicit placements on the memory-slice axis, a creation order
    that the driver accepts, the memory and compute slices left unused, and the Kubernetes
    extended resources the GPU then advertises under the C(single) and C(mixed) MIG strategies.
  - Runs on the controller only and never touches a host, so it is safe in check mode and in
    preflight plays that validate a whole inventory before anything changes.
  - Alternatively plans every item of a named config in nvidia-mig-parted's C(version v1) format.
  - Fails with an explanation when the layout is impossible, for example an unknown profile for
    the model (the valid ones are listed), a count over the profile's maximum, more compute slices
    than the GPU has, more media engines than the GPU has (at most one C(+me) instance per GPU), or
    no non-overlapping placement.
  - Compute-instance profiles (C(1c.3g.40gb)) are refused with the reason - every GPU instance gets
    one compute instance spanning all of it.
author:
  - gpufleet maintainers (@gpufleet)
options:
  gpu:
    description:
      - The GPU model, as a short key (V(A30), V(A100-40GB), V(A100-80GB), V(H100-80GB),
        V(H100-NVL), V(H100-96GB), V(PG506-96GB), V(H200), V(GH200-144GB), V(B200), V(GB200),
        V(B300), V(GB300), V(RTX-PRO-6000)), as the product name nvidia-smi prints
        (V(NVIDIA H100 80GB HBM3)), or as a PCI device id (V(0x233010DE)).
      - Required with O(layout). With O(config), optional - items are then planned for the model
        whose PCI device id their C(device-filter) names.
    type: str
  layout:
    description:
      - 'Profile name to instance count for one GPU, for example C({"3g.40gb": 1, "2g.20gb": 1}).'
      - Profile names may carry the C(MIG ) prefix nvidia-smi prints. An empty layout means MIG
        enabled without instances.
    type: dict
  config:
    description:
      - Content of an nvidia-mig-parted config file (C(version), C(mig-configs)).
      - Mutually exclusive with O(layout).
    type: dict
  name:
    description:
      - The config of O(config) to plan. May be omitted when O(config) holds exactly one.
    type: str
  include_default_configs:
    description:
      - Add the default named configs (C(all-disabled), C(all-enabled), C(all-balanced) and
        C(all-<profile>) for every catalog model, as nvidia-mig-parted names them) to O(config), so
        that O(name) may be one of them. Configs of O(config) win over defaults of the same name.
      - With this option O(config) may be omitted.
    type: bool
    default: false
extends_documentation_fragment:
  - gpufleet.sharing.attributes.HOST
attributes:
  check_mode:
    description: The module never changes anything; check mode returns the same plan.
  diff_mode:
    support: none
    description: Nothing changes, so there is no diff.
  platform:
    platforms: all
    description: Pure computation on the controller; no host access.
notes:
  - Placements for models the catalog marks as derived (A100-80GB, H100-96GB, PG506-96GB,
    GH200-144GB, B200, GB200, B300, GB300) follow the common 8-slice geometry, those of the
    RTX-PRO-6000 the A30's 4-slice pattern; no real C(nvidia-smi mig -lgipp) capture was available
    for them. RV(model.verified_placements) says which.
  - GB200 boards print one of two sets of profile names for the same geometry (V(1g.23gb), V(3g.93gb),
    V(4g.93gb), V(7g.186gb) or V(1g.24gb), V(3g.95gb), V(4g.95gb), V(7g.189gb); NVIDIA's default MIG
    config lists both). Both are accepted, a layout mixing them is refused; RV(model.namings) lists the sets.
seealso:
  - module: gpufleet.sharing.mig_config
  - module: gpufleet.sharing.gpu_facts
"""

EXAMPLES = r"""
- name: Validate a layout for an A100 40GB
  gpufleet.sharing.mig_plan:
    gpu: A100-40GB
    layout:
      4g.20gb: 1
      3g.20gb: 1
  register: plan

- name: Show where the instances go
  ansible.builtin.debug:
    msg: "{{ plan.plan.placements }}"

- name: Plan for the GPU a host really has, from its facts
  gpufleet.sharing.mig_plan:
    gpu: "{{ ansible_facts.gpufleet_gpus[0].pci_device_id }}"
    layout: "{{ mig_layout }}"
  delegate_to: localhost

- name: Check that a default config applies to an H100 NVL
  gpufleet.sharing.mig_plan:
    gpu: H100-NVL
    name: all-balanced
    include_default_configs: true

- name: Plan every item of a mig-parted config
  gpufleet.sharing.mig_plan:
    config:
      version: v1
      mig-configs:
        inference:
          - device-filter: "0x233010DE"
            devices: all
            mig-enabled: true
            mig-devices:
              1g.10gb: 7
    name: inference
"""

RETURN = r"""
model:
  description: The catalog entry of the GPU model (with O(layout)).
  returned: success and O(layout) given
  type: dict
  contains:
    key:
      description: Short model key.
      type: str
      sample: A100-40GB
    profiles:
      description:
        - Every GPU instance profile with id, maximum count, slices and placements, and the media
          engines one instance takes (C(engines) - C(decoders), C(jpeg), C(ofa)).
      type: list
      elements: dict
    engines:
      description:
        - Media engines of the whole GPU (video decoders, JPEG decoders, optical-flow accelerators).
          The instances of a layout together may not take more; this is why a GPU holds at most one
          C(+me) instance.
      type: dict
      sample: {"decoders": 4, "jpeg": 1, "ofa": 1}
    architecture:
      description: GPU architecture; V(ampere) GPUs keep MIG mode across a reboot, later ones do not.
      type: str
      sample: ampere
    verified_placements:
      description: Whether the placements come from a real capture rather than derivation.
      type: bool
    namings:
      description:
        - Sets of profile names of which one board prints only one (the same geometry named otherwise);
          a layout may use names of one set only. Empty for every model but GB200.
      type: list
      elements: list
      sample: [["1g.23gb", "1g.23gb+me", "3g.93gb", "4g.93gb", "7g.186gb"], ["1g.24gb", "1g.24gb+me", "3g.95gb", "4g.95gb", "7g.189gb"]]
plan:
  description: The plan for one GPU (with O(layout)).
  returned: success and O(layout) given
  type: dict
  contains:
    placements:
      description: Every GPU instance with its start and size on the memory-slice axis, in creation order.
      type: list
      elements: dict
      sample: [{"profile": "4g.20gb", "start": 0, "size": 4}, {"profile": "3g.20gb", "start": 4, "size": 4}]
    creation_order:
      description: C(nvidia-smi mig -cgi) profile tuples with explicit placements.
      type: list
      elements: str
      sample: ["4g.20gb:0", "3g.20gb:4"]
    unused_memory_slices:
      description: Memory slices no instance occupies.
      type: list
      elements: int
    unused_compute_slices:
      description: Compute slices no instance uses.
      type: int
    resources:
      description: Extended resources per MIG strategy; C(single) is null when it is not possible.
      type: dict
      sample: {"mixed": {"nvidia.com/mig-3g.20gb": 1, "nvidia.com/mig-4g.20gb": 1}, "single": null}
    single_possible:
      description: Whether the layout can be exposed under the C(single) strategy (one profile only).
      type: bool
plans:
  description: With O(config), one entry per config item and model - the item position, the model key, the devices and the plan.
  returned: success and O(config) given
  type: list
  elements: dict
problems:
  description: Every reason the layout was rejected.
  returned: failure
  type: list
  elements: str
"""

from typing import Optional

from ansible_collections.gpufleet.sharing.plugins.module_utils.gpu._mig_catalog import CatalogError, GpuModel, resolve_model
from ansible_collections.gpufleet.sharing.plugins.module_utils.mig._mig_parted import plan_named_config
from ansible_collections.gpufleet.sharing.plugins.module_utils.mig._mig_planner import LayoutError, plan_layout
from ansible_collections.gpufleet.sharing.plugins.module_utils.base._module import GpuFleetModule

ARGUMENT_SPEC = dict(
    gpu=dict(type='str'),
    layout=dict(type='dict'),
    config=dict(type='dict'),
    name=dict(type='str'),
    include_default_configs=dict(type='bool', default=False),
)


def main() -> None:
    GpuFleetModule(
        ARGUMENT_SPEC,
        mutually_exclusive=[('layout', 'config'), ('layout', 'include_default_configs')],
        required_one_of=[('layout', 'config', 'name')],
        required_by={'layout': ('gpu',)},
    ).run(run)


def run(mod: GpuFleetModule) -> None:
    requested = None
    if mod.params['gpu'] is not None:
        try:
            requested = resolve_model(mod.params['gpu'])
        except CatalogError as error:
            mod.fail(str(error), problems=[str(error)])
    if mod.params['layout'] is None:
        if mod.params['config'] is None and not mod.params['include_default_configs']:
            mod.fail('name needs config or include_default_configs=true')
        plan_config(mod, requested)
        return
    try:
        plan = plan_layout(requested, mod.params['layout'])
    except LayoutError as error:
        mod.fail('layout %s is not possible on %s: %s' % (
            mod.ansible.jsonify(mod.params['layout']), requested.key, error), problems=error.problems)
    mod.result.update(model=requested.as_dict(), plan=plan.as_dict())


def plan_config(mod: GpuFleetModule, requested: Optional[GpuModel]) -> None:
    """Every item of the named mig-parted config, for ``requested`` or the models its filters name."""
    planned = plan_named_config(mod.params['config'], mod.params['include_default_configs'], mod.params['name'], requested)
    if planned.message is not None:
        mod.fail(planned.message, problems=list(planned.problems), plans=list(planned.plans))
    mod.result.update(name=planned.name, plans=list(planned.plans))


if __name__ == '__main__':
    main()
