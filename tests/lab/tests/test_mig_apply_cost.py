"""The cost of a change on the host (issue 26, item 2): the mig role's apply step, in module runs.

Each module run on a GPU host costs about 0.6 s (SSH, payload, Python start), more than the lab's
own work for the whole apply. The management CDI spec (docs/reference/specs.md §7.7) is regenerated
inside mig_config's own run (its cdi_refresh option), no longer by a stat of nvidia-ctk before the
change and a loop of two nvidia-ctk commands after it: three module runs fewer on every changed host.
"""

from __future__ import annotations

import os
import re
from typing import List, Tuple

import pytest

from gpulab import gpustate, hosts
from gpulab.hosts import ctk
from test_mig_failures import Lab, _flat

pytestmark = pytest.mark.lab_hosts

HOST = "cost-h100"
# main.yml: the apply step is the include of apply.yml, up to the next task of main.yml.
APPLY_STEP = ("Apply the MIG layout and the nvidia-mig-manager files", "Restore the node's GPU operands")


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    lab_dir = str(tmp_path_factory.mktemp("costlab"))
    info = hosts.up(lab_dir, [hosts.parse_host_spec(HOST + "=H100-80GB:1")],
                    first_address=os.environ.get("GPUFLEET_TEST_LAB_ADDRESS", "127.0.0.2"))
    try:
        yield Lab(lab_dir, info)
    finally:
        hosts.down(lab_dir)


def host_module_runs(output: str) -> List[Tuple[str, int]]:
    """Per task, in order: (name, module runs on the host). With -vvv and SSH pipelining (the lab's
    inventory) each module run on the host opens one SSH command (one per loop item); a task that runs
    on the controller (debug, fail, set_fact, delegate_to localhost) opens none."""
    runs = []
    for block in re.split(r"\nTASK \[", "\n" + output)[1:]:
        name = block.split("]", 1)[0].split(" : ")[-1]
        runs.append((name, len(re.findall(r"^<[^>]+> ESTABLISH SSH CONNECTION", block, re.MULTILINE))))
    return runs


def apply_step(runs: List[Tuple[str, int]]) -> List[str]:
    """The tasks of the apply step, one entry per module run on the host."""
    names = [name for name, _count in runs]
    first, last = names.index(APPLY_STEP[0]), names.index(APPLY_STEP[1])
    return [name for name, count in runs[first:last] for _run in range(count)]


def test_a_gpu_change_makes_five_module_runs_on_the_host_in_the_apply_step(lab, tmp_path):
    state_file = lab.state_files[HOST]
    seen = len(gpustate.load(state_file).events)
    result = lab.play(tmp_path, {"mig_config": "all-1g.10gb"}, verbosity=3)
    output = result.stdout + result.stderr
    assert result.returncode == 0, _flat(output)[-4000:]
    assert apply_step(host_module_runs(output)) == [
        "Read which GPU client services are running",
        "Stop the GPU client services that are running",
        "MIG config all-1g.10gb",  # the change, its files and the management CDI spec
        "Reload systemd units after the selected-config override changed",
        "Start the GPU client services again",
    ]  # before issue 26 item 2 also: the stat of nvidia-ctk and its two commands (8 in all)
    # The spec was regenerated all the same, by mig_config, after the GPUs changed.
    state = gpustate.load(state_file)
    assert len(state.gpu(0).gpu_instances) == 7
    assert ctk.spec_device_nodes(ctk.read_spec(state_file)) == ctk.device_nodes(state)
    actors = [(e["actor"], e["action"]) for e in state.events[seen:]]
    ctk_events = [(a, b) for a, b in actors if a == "nvidia-ctk"]
    assert ctk_events == [("nvidia-ctk", "create-device-nodes"), ("nvidia-ctk", "cdi-generate")]
    gpu_tools = [i for i, (actor, _action) in enumerate(actors) if actor in ("nvidia-smi", "nvidia-mig-parted")]
    assert gpu_tools and actors.index(ctk_events[0]) > max(gpu_tools)
