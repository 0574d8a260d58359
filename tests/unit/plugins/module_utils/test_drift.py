"""Drift rows of the host side, what nodes advertise, and the one-row-per-difference merge (pure)."""

from __future__ import annotations

import pytest

from ansible_collections.gpufleet.sharing.plugins.module_utils.drift._drift import (
    CLUSTER,
    advertised_rows,
    file_found,
    host_rows,
    layout_text,
    merge_rows,
    row,
)

OFF = {"index": 0, "mig_enabled": False, "mig_pending": False, "mig_devices": {}}
SEVEN = {"index": 0, "mig_enabled": True, "mig_pending": True, "mig_devices": {"1g.5gb": 7}}
THREE = {"index": 0, "mig_enabled": True, "mig_pending": True, "mig_devices": {"1g.5gb": 1, "3g.20gb": 2}}
READ = {"ansible_facts": {"gpufleet_gpus": [{}]}}


def plan(before, after, changed, files=()):
    return {"selected": "all-1g.5gb", "before": before, "after": after, "changed_gpus": changed, "files": list(files)}


@pytest.mark.parametrize("layout, text", [
    (OFF, "MIG disabled"),
    (SEVEN, "MIG enabled: 1g.5gb x7"),
    (THREE, "MIG enabled: 1g.5gb x1, 3g.20gb x2"),
    (dict(OFF, mig_pending=True), "MIG disabled (pending: enabled)"),
    (dict(SEVEN, mig_pending=False, mig_devices={}), "MIG enabled (pending: disabled): no instance"),
])
def test_layout_text(layout, text):
    assert layout_text(layout) == text


def test_a_converged_host_has_no_row():
    assert host_rows("h", "n", READ, plan([SEVEN], [SEVEN], [], [{"path": "/f", "changed": False}]), {}) == []


def test_one_row_per_changed_gpu_with_planned_and_found_layouts():
    other = dict(SEVEN, index=1)
    rows = host_rows("h", "node-h", READ, plan([THREE, other], [SEVEN, other], [0]), {})
    assert rows == [{"node": "node-h", "what": "MIG GPU 0", "planned": "MIG enabled: 1g.5gb x7 (config all-1g.5gb)",
                     "found": "MIG enabled: 1g.5gb x1, 3g.20gb x2", "since": None,
                     "converge": "ansible-playbook playbooks/rollout.yml --limit h"}]


def test_operator_backend_hosts_converge_with_site():
    rows = host_rows("h", "n", READ, plan([OFF], [SEVEN], [0]), {}, operator_mig=True)
    assert rows[0]["converge"] == "ansible-playbook playbooks/site.yml --limit h"


def test_one_row_per_differing_file():
    files = [{"path": "/etc/a", "changed": True}, {"path": "/etc/b", "changed": True}, {"path": "/etc/c", "changed": False}]
    rows = host_rows("h", "n", READ, plan([SEVEN], [SEVEN], [], files),
                     {"/etc/a": {"content": None, "mode": None}, "/etc/b": {"content": "x", "mode": 0o600}})
    assert [(r["what"], r["found"]) for r in rows] == [
        ("nvidia-mig-manager file /etc/a", "missing or unreadable"),
        ("nvidia-mig-manager file /etc/b", "content or mode differs (mode 0o600)")]


def test_file_found_without_a_mode():
    assert file_found({"content": "x"}) == "content or mode differs (mode None)"


def test_unreadable_hosts_and_failed_plans_are_one_row():
    assert [r["found"] for r in host_rows("h", "n", {"unreachable": True, "msg": "ssh: timeout"}, {}, {})] == ["ssh: timeout"]
    assert [r["found"] for r in host_rows("h", "n", {"unreachable": True}, {}, {})] == ["unreachable"]
    assert [r["found"] for r in host_rows("h", "n", READ, {}, {})] == ["no usable read"]
    failed = host_rows("h", "n", READ, {"failed": True, "msg": "no such config", "selected": "x"}, {})
    assert [(r["what"], r["planned"], r["found"]) for r in failed] == [("MIG plan", "x", "no such config")]


def check(node, kind, name, expected, actual, ok=False):
    return {"node": node, "kind": kind, "name": name, "expected": expected, "actual": actual, "ok": ok}


def test_capacity_and_allocatable_of_one_resource_are_one_row():
    rows = advertised_rows([check("n", "capacity", "nvidia.com/gpu", "4", "1"), check("n", "allocatable", "nvidia.com/gpu", "4", "0"),
                            check("n", "label", "nvidia.com/gpu.replicas", "4", "absent"),
                            check("n", "capacity", "nvidia.com/mig-1g.5gb", "7", "7", ok=True),
                            check("(cluster)", "config", "ts", "as planned", "differs"),
                            check("m", "node", "exists", "node exists", "not found")], {"n": "host-n"})
    assert rows == [
        row("n", "advertised nvidia.com/gpu", "4", "capacity 1, allocatable 0", "ansible-playbook playbooks/site.yml --limit host-n"),
        row("n", "label nvidia.com/gpu.replicas", "4", "absent", "ansible-playbook playbooks/site.yml --limit host-n"),
        row("m", "node exists", "node exists", "not found", "ansible-playbook playbooks/site.yml --limit m")]


def test_row_shows_absent_for_none():
    assert row("n", "w", None, 3, "c")["planned"] == "absent"


def test_a_cause_on_a_node_explains_what_it_advertises():
    layout = row("a", "MIG GPU 0", "x", "y", "c")
    label = row("b", "label nvidia.com/device-plugin.config", "ts4", None, "c")
    state = row("c", "label nvidia.com/mig.config.state", None, "failed", "c")
    advertised = [row(n, "advertised nvidia.com/gpu", "4", "1", "c") for n in ("a", "b", "c", "d")]
    merged = merge_rows([state, label, layout], advertised)
    assert [(r["node"], r["what"]) for r in merged] == [
        ("a", "MIG GPU 0"), ("b", "label nvidia.com/device-plugin.config"), ("c", "advertised nvidia.com/gpu"),
        ("c", "label nvidia.com/mig.config.state"), ("d", "advertised nvidia.com/gpu")]


@pytest.mark.parametrize("what", ["GPU Operator value mig.strategy", "device-plugin ConfigMap cm", "ClusterPolicy device-plugin config"])
def test_a_fleet_wide_cause_explains_every_advertised_row(what):
    cause = row(CLUSTER, what, "x", "y", "c")
    assert merge_rows([cause], [row("d", "advertised nvidia.com/gpu", "4", "1", "c")]) == [cause]


def test_a_lock_row_explains_nothing_and_cluster_rows_come_first():
    lock = row(CLUSTER, "rollout lock", "free", "held", "c")
    adv = row("a", "advertised nvidia.com/gpu", "4", "1", "c")
    assert merge_rows([adv], [dict(adv), lock]) == [lock, adv]  # the same difference twice is one row
