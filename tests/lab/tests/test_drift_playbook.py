"""drift.yml (issue 24 part 2): after a converged site.yml, someone changes nodes by hand (a MIG layout
through the lab's nvidia-smi, the device-plugin config label removed, the MIG manager's state label
set to failed); drift.yml reports exactly those rows and nothing else, and changes nothing: no
resourceVersion moves, the host state files stay byte-identical, every host's recap says changed=0.
"""

from __future__ import annotations

import html
import json
import os
import re

import pytest

from gpulab import hosts, smi

from labtools import wait_until
from rollout_lab import flat, start_lab

pytestmark = pytest.mark.lab_hosts

SHARING = [{"name": "ts-mig", "strategy": "time-slicing", "nodes": ["flt-1"],
            "resources": [{"name": "nvidia.com/mig-1g.5gb", "replicas": 2}]}]
DP_LABEL, MIG_STATE = "nvidia.com/device-plugin.config", "nvidia.com/mig.config.state"
ROLLOUT = "ansible-playbook playbooks/rollout.yml --limit %s"


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    lab_dir = str(tmp_path_factory.mktemp("driftlab"))
    lab = start_lab(lab_dir)
    try:
        result = lab.play("site.yml", gpu_sharing_configs=SHARING)
        assert result.returncode == 0, flat(result.stdout + result.stderr)[-4000:]
        yield lab
    finally:
        hosts.down(lab_dir)


def drift(lab, **variables):
    result = lab.play("drift.yml", gpu_sharing_configs=SHARING, **variables)
    output = flat(result.stdout + result.stderr)
    recaps = re.findall(r"(\S+)\s*: ok=\d+\s+changed=(\d+)", result.stdout)
    assert recaps and all(changed == "0" for _host, changed in recaps), output[-3000:]
    with open(os.path.join(lab.report_dir, "fleet-drift.json"), encoding="utf-8") as handle:
        report = json.load(handle)
    return result, output, report


def snapshot(lab):
    """The resourceVersion of every object drift.yml could write, and the bytes of every host's state."""
    k8s, versions = lab.k8s, {}
    for kind, namespace in (("Node", None), ("ConfigMap", "gpu-operator"), ("DaemonSet", "gpu-operator"),
                            ("ClusterPolicy", None), ("Lease", "kube-system"), ("Namespace", None)):
        for obj in k8s.list(kind, namespace=namespace):
            versions[(kind, obj["metadata"]["name"])] = obj["metadata"]["resourceVersion"]
    states = {}
    for name, host in lab.hosts.items():
        with open(host["state_file"], "rb") as handle:
            states[name] = handle.read()
    return versions, states


def test_a_converged_fleet_has_no_drift(fleet):
    result, output, report = drift(fleet)
    assert result.returncode == 0, output[-3000:]
    assert report["drift"] == [] and report["summary"]["ok"], report
    assert "No drift: the fleet is as planned." in output


def test_the_kueue_quotas_are_compared(fleet):
    """Issue 43 (5): drift.yml compares the Kueue team quotas (gpu_quotas, verified): teams whose queues were
    never written are one row per planned quota, found absent, converged by site.yml; nothing changes.
    Runs on the converged fleet, before the hand changes of the next test."""
    teams = [{"name": "vision", "namespaces": ["vision"], "shares": {"nvidia.com/mig-1g.5gb": "50%"}}]
    before = snapshot(fleet)
    result, output, report = drift(fleet, gpufleet_teams=teams, gpufleet_drift_fail=False)
    assert result.returncode == 0, output[-3000:]
    rows = [(r["node"], r["what"], r["planned"], r["found"], r["converge"]) for r in report["drift"] if r["what"].startswith("Kueue ")]
    assert rows == KUEUE_ROWS, rows
    assert snapshot(fleet) == before


# 50% of what both A100s will advertise in the plan: 7 x 1g.5gb on flt-0, 14 on flt-1 (time-sliced, 2 replicas).
KUEUE_ROWS = [("(cluster)", "Kueue team/vision quota gpufleet-nvidia-a100-sxm4-40gb nvidia.com/mig-1g.5gb", "10", "absent",
               "ansible-playbook playbooks/site.yml")]


def test_a_lock_namespace_that_does_not_exist_is_unknown_not_no_drift(fleet):
    """Issue 43 (5): the Lease is looked for in a namespace that does not exist: drift cannot know whether a
    rollout holds the lock (and a rollout could not take it there); it used to report "No drift"."""
    before = snapshot(fleet)
    result, output, report = drift(fleet, gpufleet_rollout_lock_namespace="no-such-ns")
    assert result.returncode != 0 and "No drift" not in output, output[-3000:]
    assert [(r["node"], r["what"]) for r in report["drift"]] == [("(cluster)", "rollout lock")], report["drift"]
    row = report["drift"][0]
    assert row["found"].startswith("unknown: namespace no-such-ns does not exist"), row
    assert "kubectl create namespace no-such-ns" in row["converge"], row
    assert snapshot(fleet) == before


def test_hand_changes_are_exactly_the_rows_and_nothing_changes(fleet):
    k8s = fleet.k8s
    state = fleet.hosts["flt-0"]["state_file"]
    for argv in (["mig", "-dci"], ["mig", "-dgi"], ["mig", "-cgi", "9,9", "-C"]):  # two 3g.20gb by hand
        rc, out, err = smi.run(argv, state)
        assert rc == 0, (argv, out, err)
    node = k8s.get("Node", "flt-1")
    labels = node["metadata"]["labels"]
    assert labels.get(DP_LABEL) == "ts-mig", labels
    k8s.set_node_labels("flt-1", {DP_LABEL: None, MIG_STATE: "failed"})
    # Let the lab's GFD and device plugin follow the hand changes before the snapshot.
    wait_until("GFD sees flt-0's new layout",
               lambda: (k8s.get("Node", "flt-0")["metadata"]["labels"]).get("nvidia.com/mig-3g.20gb.count") == "2", 60)
    wait_until("flt-1's device plugin drops the label's config",
               lambda: (k8s.get("Node", "flt-1")["metadata"].get("annotations") or {}).get("lab.gpufleet.io/device-plugin-config")
               != "ts-mig", 60)
    before = snapshot(fleet)

    result, output, report = drift(fleet)

    assert result.returncode != 0, output[-3000:]  # gpufleet_drift_fail defaults to true
    assert [(r["node"], r["what"], r["planned"], r["found"], r["since"], r["converge"]) for r in report["drift"]] == [
        ("flt-0", "MIG GPU 0", "MIG enabled: 1g.5gb x7 (config all-1g.5gb)", "MIG enabled: 3g.20gb x2", None, ROLLOUT % "flt-0"),
        ("flt-1", "label " + DP_LABEL, "ts-mig", "absent", None, "ansible-playbook playbooks/site.yml --limit flt-1"),
        ("flt-1", "label " + MIG_STATE, "absent", "failed", None, "kubectl label node flt-1 %s-" % MIG_STATE),
    ]
    assert snapshot(fleet) == before
    assert "Drift: 3 difference(s) on flt-0, flt-1" in output
    with open(os.path.join(fleet.report_dir, "fleet-drift.xml"), encoding="utf-8") as handle:
        assert handle.read().count("<failure ") == 3
    with open(os.path.join(fleet.report_dir, "fleet-drift.html"), encoding="utf-8") as handle:
        page = handle.read()
    for row in report["drift"]:  # the page people read shows every row (the renderer's own tests check the figures)
        for field in ("node", "what", "planned", "found", "converge"):
            assert html.escape(row[field], quote=False) in page, (field, row)

    result, output, again = drift(fleet, gpufleet_drift_fail=False)
    assert result.returncode == 0, output[-3000:]
    assert again["drift"] == report["drift"]
    assert snapshot(fleet) == before
