#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: gpu_facts
short_description: Gather NVIDIA GPU inventory, MIG state and compute processes of a host
version_added: 0.1.0
description:
  - Runs C(nvidia-smi) on the host and sets C(ansible_facts.gpufleet_gpus), a list with one entry
    per GPU - identity (index, name, UUID, PCI bus and device id), memory, driver version, MIG mode
    (capable, current, pending), the GPU instances with their placements, compute instances and
    MIG device UUIDs, the GPU instance profiles the GPU supports with their placements, and the
    compute processes with the GPU or MIG device they run on.
  - Uses as few C(nvidia-smi) calls as the host needs - two on a host without MIG-capable GPUs, four
    when MIG is capable but disabled, seven when MIG is enabled - and reports the count in
    C(ansible_facts.gpufleet_nvidia_smi_calls).
  - A host without C(nvidia-smi) or without GPUs gets an empty list and a reason in
    C(ansible_facts.gpufleet_gpus_reason), not a failure, unless O(fail_on_missing=true). Any other
    C(nvidia-smi) error fails the task with its output.
  - Output is parsed by tokens rather than column positions, so the table layouts of older and newer
    drivers are both understood.
author:
  - gpufleet maintainers (@gpufleet)
options:
  nvidia_smi_path:
    description:
      - Path of the C(nvidia-smi) executable. By default it is searched in E(PATH) and the usual
        driver locations.
    type: path
  fail_on_missing:
    description:
      - Fail when C(nvidia-smi) is missing or reports no GPU, instead of returning an empty list.
    type: bool
    default: false
  gather_profiles:
    description:
      - Also list the GPU instance profiles and placements each MIG-capable GPU supports
        (C(nvidia-smi mig -lgip) and C(-lgipp)). Turn off to save two calls per host.
    type: bool
    default: true
attributes:
  check_mode:
    support: full
    description: Read-only; runs in check mode.
  diff_mode:
    support: none
    description: Nothing changes, so there is no diff.
  facts:
    support: full
    description: Sets C(gpufleet_gpus), C(gpufleet_gpus_reason) and C(gpufleet_nvidia_smi_calls).
  platform:
    support: full
    platforms: posix
    description: Hosts with the NVIDIA driver's C(nvidia-smi).
notes:
  - Processes come from the process table of plain C(nvidia-smi), which names the GPU instance and
    compute instance of processes on MIG devices. Long process names may be shortened by the driver.
seealso:
  - module: gpufleet.sharing.mig_config
  - module: gpufleet.sharing.mig_plan
"""

EXAMPLES = r"""
- name: Gather GPU facts
  gpufleet.sharing.gpu_facts:

- name: Show each GPU and its MIG layout
  ansible.builtin.debug:
    msg: "{{ item.index }} {{ item.name }} MIG={{ item.mig.current }} {{ item.mig.instances | map(attribute='profile') | list }}"
  loop: "{{ ansible_facts.gpufleet_gpus }}"

- name: Require GPUs on hosts of the GPU groups
  gpufleet.sharing.gpu_facts:
    fail_on_missing: true

- name: Find busy GPUs before a change
  ansible.builtin.set_fact:
    busy_gpus: "{{ ansible_facts.gpufleet_gpus | selectattr('processes') | map(attribute='index') | list }}"
"""

RETURN = r"""
ansible_facts:
  description: Facts set on the host.
  returned: always
  type: complex
  contains:
    gpufleet_gpus:
      description: One entry per GPU, ordered by index.
      type: list
      elements: dict
      contains:
        index:
          description: nvidia-smi's GPU index.
          type: int
        name:
          description: Product name as nvidia-smi prints it.
          type: str
          sample: NVIDIA H200
        uuid:
          description: GPU UUID.
          type: str
          sample: GPU-163e5d76-4ee1-1290-9652-cc41f8103e00
        pci_bus_id:
          description: PCI bus id.
          type: str
          sample: "00000000:00:06.0"
        pci_device_id:
          description: PCI device and vendor id, the form mig-parted device filters use.
          type: str
          sample: "0x233510DE"
        memory_total_mib:
          description: Total memory in MiB.
          type: int
          sample: 143771
        driver_version:
          description: NVIDIA driver version.
          type: str
        mig:
          description: >-
            MIG state - C(capable), C(current), C(pending) (booleans), C(change_pending) (a mode change
            waits for a GPU reset or reboot) and C(instances) (C(profile), C(gi_id), C(gi_profile_id),
            C(placement) with C(start) and C(size), C(compute_instances), C(uuid) of the MIG device).
          type: dict
        supported_profiles:
          description: GPU instance profiles with free and total counts, memory, SM count and placements.
          type: list
          elements: dict
        processes:
          description: Compute processes with C(pid), C(name), C(used_memory_mib), C(gi_id), C(ci_id) and C(mig_device_uuid).
          type: list
          elements: dict
    gpufleet_gpus_reason:
      description: Why the list is empty (no nvidia-smi, no GPU); empty when GPUs were found.
      type: str
    gpufleet_nvidia_smi_calls:
      description: How many times nvidia-smi was run.
      type: int
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.sharing.plugins.module_utils._nvidia_smi import (
    NO_COMPUTE_INSTANCES,
    NO_DEVICES,
    NO_GPU_INSTANCES,
    NO_MIG_ENABLED,
    NO_MIG_SUPPORTED,
    QUERY_ARGV,
    ParseError,
    build_gpu_facts,
    commands_for,
    parse_compute_instances,
    parse_gpu_instance_placements,
    parse_gpu_instance_profiles,
    parse_gpu_instances,
    parse_list_gpus,
    parse_query_gpus,
    parse_summary,
)

DRIVER_DIRS = ['/usr/bin', '/usr/local/nvidia/bin', '/usr/local/bin', '/opt/nvidia/bin']
# "nothing to list" answers: not errors, whatever the exit code (SPECS 4.3, 5).
EMPTY_ANSWERS = (NO_MIG_ENABLED, NO_MIG_SUPPORTED, NO_GPU_INSTANCES, NO_COMPUTE_INSTANCES)


class NvidiaSmi:
    """Runs nvidia-smi with argv lists and counts the calls."""

    def __init__(self, module, path):
        self.module = module
        self.path = path
        self.calls = 0

    def run(self, args, allow_empty=False):
        self.calls += 1
        argv = [self.path] + list(args)
        rc, out, err = self.module.run_command(argv, environ_update={'LC_ALL': 'C'})
        if allow_empty and any(message in out + err for message in EMPTY_ANSWERS):
            return ''
        if rc != 0:
            self.module.fail_json(msg='%s failed with exit code %d: %s' % (
                ' '.join(argv), rc, (err or out).strip()), rc=rc, stdout=out, stderr=err, cmd=argv)
        return out


def _empty(module, reason, calls):
    if module.params['fail_on_missing']:
        module.fail_json(msg=reason)
    module.exit_json(changed=False, ansible_facts={
        'gpufleet_gpus': [], 'gpufleet_gpus_reason': reason, 'gpufleet_nvidia_smi_calls': calls})


def main():
    module = AnsibleModule(
        argument_spec=dict(
            nvidia_smi_path=dict(type='path'),
            fail_on_missing=dict(type='bool', default=False),
            gather_profiles=dict(type='bool', default=True),
        ),
        supports_check_mode=True,
    )
    path = module.params['nvidia_smi_path'] or module.get_bin_path('nvidia-smi', opt_dirs=DRIVER_DIRS)
    if not path:
        _empty(module, 'nvidia-smi was not found (searched PATH and %s)' % ', '.join(DRIVER_DIRS), 0)
    smi = NvidiaSmi(module, path)

    smi.calls += 1
    rc, out, err = module.run_command([path] + list(QUERY_ARGV), environ_update={'LC_ALL': 'C'})
    if rc != 0 or not out.strip():
        text = (err or out).strip()
        if NO_DEVICES in text or (rc == 0 and not out.strip()):
            _empty(module, 'nvidia-smi found no GPU: %s' % (text or 'empty output'), smi.calls)
        module.fail_json(msg='%s %s failed with exit code %d: %s' % (path, ' '.join(QUERY_ARGV), rc, text),
                         rc=rc, stdout=out, stderr=err)
    try:
        rows = parse_query_gpus(out)
        summary = parse_summary(smi.run([]))
        outputs = {}
        for args in commands_for(rows):
            if args[1:2] in (('-lgip',), ('-lgipp',)) and not module.params['gather_profiles']:
                continue
            outputs[args] = smi.run(args, allow_empty=args[0] == 'mig')
        facts = build_gpu_facts(
            rows, summary,
            list_gpus=parse_list_gpus(outputs[('-L',)]) if ('-L',) in outputs else None,
            gpu_instances=parse_gpu_instances(outputs.get(('mig', '-lgi'), '')),
            compute_instances=parse_compute_instances(outputs.get(('mig', '-lci'), '')),
            profiles=parse_gpu_instance_profiles(outputs.get(('mig', '-lgip'), '')),
            placements=parse_gpu_instance_placements(outputs.get(('mig', '-lgipp'), '')),
        )
    except ParseError as error:
        module.fail_json(msg='could not parse nvidia-smi output: %s' % error)
    module.exit_json(changed=False, ansible_facts={
        'gpufleet_gpus': facts, 'gpufleet_gpus_reason': '', 'gpufleet_nvidia_smi_calls': smi.calls})


if __name__ == '__main__':
    main()
