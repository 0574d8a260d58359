"""Issue 43 (6): a converged host whose node advertises less than its plan is repaired by the next site.yml.

Someone changes a host's MIG layout by hand and restarts the device plugin, then puts the planned layout
back by hand without restarting it. The device plugin reads the GPUs only when it starts (the lab's as
NVIDIA's: ``gpulab.cluster.operator.programs`` keeps the devices it found at start), so the node keeps
advertising the hand-made layout while the host has its plan. The rollout used to see a converged host,
restart nothing, and fail verification on every run; drift named the difference but no command.
"""

from __future__ import annotations

import json
import os
import re

import pytest

from gpulab import hosts, smi

from labtools import wait_until
from rollout_lab import flat, start_lab

pytestmark = pytest.mark.lab_hosts

PLANNED, HAND = "nvidia.com/mig-1g.5gb", "nvidia.com/mig-3g.20gb"
PLUGIN = "app=nvidia-device-plugin-daemonset"


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    lab_dir = str(tmp_path_factory.mktemp("readvertiselab"))
    lab = start_lab(lab_dir)
    try:
        result = lab.play("site.yml")
        assert result.returncode == 0, flat(result.stdout + result.stderr)[-4000:]
        yield lab
    finally:
        hosts.down(lab_dir)


def capacity(lab, node="flt-0"):
    status = (lab.k8s.get("Node", node) or {}).get("status") or {}
    return {k: int(v) for k, v in (status.get("capacity") or {}).items() if k.startswith("nvidia.com/")}


def by_hand(lab, profile_ids):
    state = lab.hosts["flt-0"]["state_file"]
    for argv in (["mig", "-dci"], ["mig", "-dgi"], ["mig", "-cgi", ",".join(profile_ids), "-C"]):
        rc, out, err = smi.run(argv, state)
        assert rc == 0, (argv, out, err)


def restart_device_plugin(lab):
    pods = lab.k8s.list("Pod", namespace="gpu-operator", label_selector=PLUGIN, field_selector="spec.nodeName=flt-0")
    assert pods, "no device plugin pod on flt-0"
    for pod in pods:
        lab.k8s.delete("Pod", pod["metadata"]["name"], namespace="gpu-operator")


def test_a_converged_host_that_advertises_less_is_restarted_verified_and_then_settled(fleet):
    assert capacity(fleet).get(PLANNED) == 7
    by_hand(fleet, ["9", "9"])  # two 3g.20gb, and the device plugin restarted: the node advertises them
    restart_device_plugin(fleet)
    wait_until("flt-0 advertises the hand-made layout", lambda: capacity(fleet).get(HAND) == 2 or None, 60)
    by_hand(fleet, ["19"] * 7)  # the plan again on the host, the device plugin NOT restarted
    assert capacity(fleet).get(HAND) == 2 and not capacity(fleet).get(PLANNED), capacity(fleet)

    # drift names the difference and the command that converges it
    drift = fleet.play("drift.yml")
    assert drift.returncode != 0, flat(drift.stdout)[-3000:]
    with open(os.path.join(fleet.report_dir, "fleet-drift.json"), encoding="utf-8") as handle:
        rows = [row for row in json.load(handle)["drift"] if row["node"] == "flt-0"]
    assert sorted(row["what"] for row in rows) == ["advertised %s" % PLANNED, "advertised %s" % HAND], rows
    assert {row["converge"] for row in rows} == {"ansible-playbook playbooks/site.yml --limit flt-0"}, rows

    result = fleet.play("site.yml", limit="flt-0")  # that command
    output = flat(result.stdout + result.stderr)
    assert result.returncode == 0, output[-4000:]
    assert capacity(fleet).get(PLANNED) == 7 and not capacity(fleet).get(HAND), capacity(fleet)
    with open(os.path.join(fleet.report_dir, "rollout-summary.json"), encoding="utf-8") as handle:
        rows = {row["node"]: row for row in json.load(handle)["nodes"]}
    assert rows["flt-0"]["outcome"] == "changed", rows
    node = fleet.node("flt-0")
    assert not node["unschedulable"] and node["annotation"] is None, node

    again = fleet.play("site.yml")
    recaps = re.findall(r"(\S+)\s*: ok=\d+\s+changed=(\d+)", again.stdout)
    assert again.returncode == 0 and recaps and all(c == "0" for _h, c in recaps), flat(again.stdout)[-3000:]
