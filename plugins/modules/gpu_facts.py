#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)


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
    C(ansible_facts.gpufleet_nvidia_smi_calls). The calls after the first (C(--query-gpu)) depend on
    its answer only and run at the same time, so a host's read lasts about two calls, however many
    it needs (each call mostly waits on the driver).
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
  gather_processes:
    description:
      - Also read the compute processes on each GPU (the plain C(nvidia-smi) table). Turn off to save a
        call per host when only the GPUs and their MIG state are needed; RV(ansible_facts.gpufleet_gpus[].processes)
        is then null, unless MIG is enabled on a GPU of the host (the table is read anyway for its MIG
        device numbers).
    type: bool
    default: true
    version_added: 0.2.0
  read_files:
    description:
      - Absolute paths of files to read as well, returned in RV(files) (text and permission bits).
        The rollout reads the nvidia-mig-manager files that M(gpufleet.sharing.mig_config) maintains
        here, so that its plan is made on the controller from this one read.
      - Meant for small configuration files, not for secrets, which would be in the result.
    type: list
    elements: path
    default: []
    version_added: 0.2.0
extends_documentation_fragment:
  - gpufleet.sharing.attributes.HOST
attributes:
  check_mode:
    description: Read-only; runs in check mode.
  diff_mode:
    support: none
    description: Nothing changes, so there is no diff.
  facts:
    support: full
    description: Sets C(gpufleet_gpus), C(gpufleet_gpus_reason) and C(gpufleet_nvidia_smi_calls).
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
files:
  description:
    - Per path of O(read_files), its C(content) and C(mode) (permission bits, an integer); both null
      when the file is missing or unreadable.
  returned: always
  type: dict
  sample: {"/etc/nvidia-mig-manager/config.yaml": {"content": "version: v1\\n", "mode": 420}}
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
          description:
            - Compute processes with C(pid), C(name), C(used_memory_mib), C(gi_id), C(ci_id) and C(mig_device_uuid).
            - Null when not gathered (O(gather_processes=false)).
          type: list
          elements: dict
    gpufleet_gpus_reason:
      description: Why the list is empty (no nvidia-smi, no GPU); empty when GPUs were found.
      type: str
    gpufleet_nvidia_smi_calls:
      description: How many times nvidia-smi was run.
      type: int
"""

import os
from typing import Any, Dict, List, Sequence, Tuple

# Before the rest of the collection, which needs a newer Python: a clear refusal on an older one.
from ansible_collections.gpufleet.sharing.plugins.module_utils.base._host_python import refuse_older_python
refuse_older_python("gpufleet.sharing.gpu_facts")

from ansible_collections.gpufleet.sharing.plugins.module_utils.gpu._host import HostCommands, read_file  # noqa: E402
from ansible_collections.gpufleet.sharing.plugins.module_utils.base._module import GpuFleetModule  # noqa: E402
from ansible_collections.gpufleet.sharing.plugins.module_utils.gpu._nvidia_smi import (  # noqa: E402
    QUERY_ARGV,
    ParseError,
    commands_for,
    empty_answer,
    facts_from_outputs,
    needs_summary,
    no_gpu_reason,
    parse_query_gpus,
    parse_summary,
)

ARGUMENT_SPEC = dict(
    nvidia_smi_path=dict(type='path'),
    fail_on_missing=dict(type='bool', default=False),
    gather_profiles=dict(type='bool', default=True),
    gather_processes=dict(type='bool', default=True),
    read_files=dict(type='list', elements='path', default=[]),
)
DRIVER_DIRS = ['/usr/bin', '/usr/local/nvidia/bin', '/usr/local/bin', '/opt/nvidia/bin']


def main() -> None:
    GpuFleetModule(ARGUMENT_SPEC).run(run)


def run(mod: GpuFleetModule) -> None:
    """Query the GPUs, then run only the calls commands_for() says this host needs."""
    mod.result['files'] = read_files(mod, mod.params['read_files'])
    path = mod.params['nvidia_smi_path'] or mod.ansible.get_bin_path('nvidia-smi', opt_dirs=DRIVER_DIRS)
    if not path:
        report(mod, [], 'nvidia-smi was not found (searched PATH and %s)' % ', '.join(DRIVER_DIRS), 0)
        return
    smi = HostCommands(mod, environ={'LC_ALL': 'C'})
    rc, out, err = smi.run([path] + list(QUERY_ARGV))
    if rc != 0 or not out.strip():
        reason = no_gpu_reason(rc, out, err)
        if reason:
            report(mod, [], reason, smi.calls)
            return
        mod.fail('%s %s failed with exit code %d: %s' % (path, ' '.join(QUERY_ARGV), rc, (err or out).strip()),
                 rc=rc, stdout=out, stderr=err)
    try:
        rows = parse_query_gpus(out)
        # Everything else depends on the query only: run together, checked in this order.
        wanted = ([()] if needs_summary(rows, mod.params['gather_processes']) else []) \
            + commands_for(rows, mod.params['gather_profiles'])
        answers = dict(zip(wanted, smi.run_together([[path] + list(args) for args in wanted])))
        texts = dict((args, checked(mod, [path] + list(args), answers[args], allow_empty=args[:1] == ('mig',)))
                     for args in wanted)
        summary = parse_summary(texts.pop(())) if () in texts else None
        facts = facts_from_outputs(rows, summary, texts)
    except ParseError as error:
        mod.fail('could not parse nvidia-smi output: %s' % error)
    report(mod, facts, '', smi.calls)


def read_files(mod: GpuFleetModule, paths: Sequence[str]) -> Dict[str, Dict[str, Any]]:
    relative = [name for name in paths if not os.path.isabs(name)]
    if relative:
        mod.fail('read_files: expected absolute paths, got %s' % ', '.join(relative))
    return dict((name, dict(zip(('content', 'mode'), read_file(name)))) for name in paths)


def checked(mod: GpuFleetModule, argv: Sequence[str], answer: Tuple[int, str, str], allow_empty: bool = False) -> str:
    """The output of one call, or the module fails with it (a "nothing to list" answer is empty)."""
    rc, out, err = answer
    if allow_empty and empty_answer(out, err):
        return ''
    if rc != 0:
        mod.fail('%s failed with exit code %d: %s' % (' '.join(argv), rc, (err or out).strip()),
                 rc=rc, stdout=out, stderr=err, cmd=list(argv))
    return out


def report(mod: GpuFleetModule, facts: List[Dict[str, Any]], reason: str, calls: int) -> None:
    """Set the facts; an empty list with a reason fails instead when fail_on_missing is set."""
    if reason and mod.params['fail_on_missing']:
        mod.fail(reason)
    mod.result['ansible_facts'] = {
        'gpufleet_gpus': facts, 'gpufleet_gpus_reason': reason, 'gpufleet_nvidia_smi_calls': calls}


if __name__ == '__main__':
    main()
