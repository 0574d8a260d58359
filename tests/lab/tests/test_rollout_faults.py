"""The rollout's promise under faults (issue 10): a failed node stays cordoned with its reason, the
summary says so, and a re-run picks the node up and converges.

One small fleet (two A100 hosts + the virtual cluster, operator installed by site.yml once); each
case changes flt-0's MIG layout under a fault, checks what is left behind, then re-runs.
"""

from __future__ import annotations

import re
import signal
import time

import pytest

from gpulab import gpustate, hosts, workload
from gpulab.cluster import server

from labtools import wait_until
from rollout_lab import LEASE_NAME, LEASE_NS, WORK_NS, flat, start_lab

pytestmark = pytest.mark.lab_hosts

LAYOUTS = ["all-1g.5gb", "all-balanced"]
NODES = ("flt-0", "flt-1")
EXPECTED = {"all-1g.5gb": ["1g.5gb"] * 7, "all-balanced": ["1g.5gb", "1g.5gb", "2g.10gb", "3g.20gb"]}


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    """The fleet's first site.yml run is the ClusterPolicy-never-ready case (installing the operator
    times out); the next one, without the fault, is its re-run and the fleet every case starts from."""
    lab_dir = str(tmp_path_factory.mktemp("rolloutlab"))
    lab = start_lab(lab_dir)
    try:
        lab.add_fault("named", condition="clusterpolicy-never-ready", count=None)
        try:
            lab.never_ready = lab.play("site.yml", mig_config=LAYOUTS[0], gpu_operator_wait_timeout=4)
            lab.never_ready_left = ({n: lab.node(n) for n in NODES}, [_profiles(lab, n) for n in NODES], lab.lease())
        finally:
            lab.clear_faults()
        lab.rerun = lab.play("site.yml", mig_config=LAYOUTS[0])
        assert lab.rerun.returncode == 0, flat(lab.rerun.stdout + lab.rerun.stderr)[-4000:]
        lab.layout = lab.flt1_layout = LAYOUTS[0]
        yield lab
    finally:
        hosts.down(lab_dir)


# mig-parted runs its apply-start hooks before it changes the GPUs (docs/reference/specs.md §6.2, the lab's
# gpulab/migparted/apply.py): this one holds the apply there until the test says go, then ends with a status.
WAITING_HOOK = """version: v1
hooks:
  apply-start:
  - command: /bin/sh
    args: ["-c", "touch %(started)s; while [ ! -e %(go)s ]; do sleep 0.1; done; touch %(ended)s; exit %(status)d"]
"""


class HeldApply:
    """WAITING_HOOK's file (``hooks``, for mig_parted_hooks_file) and its three flags in tmp_path."""

    def __init__(self, tmp_path, status: int) -> None:
        self.hooks, self.started, self.go, self.ended = (
            tmp_path / name for name in ("hooks.yaml", "hook-started", "hook-go", "hook-ended"))
        self.hooks.write_text(WAITING_HOOK % {"started": self.started, "go": self.go, "ended": self.ended,
                                              "status": status})

    def wait_started(self) -> None:
        wait_until("the apply-start hook on flt-0", self.started.exists, 240)

    def release(self) -> None:
        self.go.touch()


def _next_layout(lab) -> str:
    lab.layout = LAYOUTS[1 - LAYOUTS.index(lab.layout)]
    return lab.layout


def _profiles(lab, host: str = "flt-0") -> list:
    return sorted(gi.profile for gi in gpustate.load(lab.hosts[host]["state_file"]).gpu(0).gpu_instances)


def _assert_left_failed(lab, result, fragment: str, outcome: str = "failed", name: str = "flt-0") -> None:
    output = flat(result.stdout + result.stderr)
    assert result.returncode != 0, output[-3000:]
    node = lab.node(name)
    assert node["unschedulable"], node
    assert (node["annotation"] or "").startswith("failed: ") and fragment in node["annotation"], node
    row = lab.summary()[name]
    assert row["outcome"] == outcome and fragment in row["reason"], row
    assert lab.lease() is None  # released at the end of a failed run too


def _assert_converged(lab, result, names=("flt-0",), outcome: str = "changed") -> None:
    output = flat(result.stdout + result.stderr)
    assert result.returncode == 0, output[-4000:]
    for name in names:
        assert lab.node(name) == {"unschedulable": False, "annotation": None}
        assert lab.summary()[name]["outcome"] == outcome
        assert _profiles(lab, name) == sorted(EXPECTED[lab.layout])
    assert lab.lease() is None


def test_cluster_policy_never_ready_fails_before_any_node_is_touched(fleet):
    """Installing the operator times out waiting for the ClusterPolicy: a clear error, no node
    cordoned or annotated, no GPU changed, no lock left; the re-run (the fixture's) converges."""
    output = flat(fleet.never_ready.stdout + fleet.never_ready.stderr)
    assert fleet.never_ready.returncode != 0
    assert "fault injected: clusterpolicy-never-ready" in output, output[-3000:]
    nodes, profiles, lease = fleet.never_ready_left
    assert nodes == {n: {"unschedulable": False, "annotation": None} for n in NODES}
    assert profiles == [[], []] and lease is None
    assert [_profiles(fleet, n) for n in NODES] == [sorted(EXPECTED[LAYOUTS[0]])] * 2  # after the re-run


def test_lock_held_by_another_run_is_refused_then_taken_when_expired(fleet):
    now = time.time()
    lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
             "metadata": {"name": LEASE_NAME, "namespace": LEASE_NS},
             "spec": {"holderIdentity": "run-x bob@ctl-2", "acquireTime": _micro(now - 5),
                      "renewTime": _micro(now - 5), "leaseDurationSeconds": 600}}
    fleet.k8s.create(lease)
    try:
        refused = fleet.play(limit="flt-0", mig_config=fleet.layout)
        output = flat(refused.stdout + refused.stderr)
        assert refused.returncode != 0
        assert ("rollout lock kube-system/gpufleet-sharing-rollout is held by run-x bob@ctl-2 since %s (expires %s)"
                % (_micro(now - 5), _micro(now + 595))) in output
        assert fleet.node("flt-0") == {"unschedulable": False, "annotation": None}
        stale = fleet.lease()
        stale["spec"]["renewTime"] = _micro(now - 700)  # a crashed run: never renewed
        fleet.k8s.replace(stale)
        taken = fleet.play(limit="flt-0", mig_config=fleet.layout)
        assert taken.returncode == 0, flat(taken.stdout + taken.stderr)[-3000:]
        assert fleet.lease() is None
    finally:
        fleet.k8s.delete("Lease", LEASE_NAME, namespace=LEASE_NS)


def test_gpu_workload_left_after_the_drain_fails_its_node_naming_it(fleet):
    """#2: drain first, then look at the GPUs. flt-0 runs a GPU pod without a controller (the drain,
    not forced, may not evict it); flt-1 a compute process outside Kubernetes (the drain cannot see
    it; the busy-GPU check after the drain refuses it). Each node fails with what blocks it."""
    assert fleet.flt1_layout == fleet.layout  # both nodes change
    layout = _next_layout(fleet)
    fleet.run_gpu_pod("trainer")
    state_file = fleet.hosts["flt-1"]["state_file"]
    pid = workload.start(state_file, 0, "train.py", 1024, mig_device=0)
    before = [_profiles(fleet, n) for n in NODES]
    try:
        failed = fleet.play(mig_config=layout)
        _assert_left_failed(fleet, failed, "work/trainer not managed by a controller")
        _assert_left_failed(fleet, failed, "has compute processes running: PIDs %d" % pid, name="flt-1")
        assert [_profiles(fleet, n) for n in NODES] == before
    finally:
        fleet.delete_pod("trainer")
        workload.stop(state_file, pid)
    _assert_converged(fleet, fleet.play(mig_config=layout), NODES)
    fleet.flt1_layout = layout


def test_verification_pods_pending_then_rerun_picks_the_node_up(fleet):
    """#1: the node failed after its apply; the re-run sees the layout converged but our annotation."""
    layout = _next_layout(fleet)
    fleet.add_fault("named", condition="scheduler-stuck", count=None)
    try:
        failed = fleet.play(limit="flt-0", mig_config=layout, verify_pod_timeout=8)
    finally:
        fleet.clear_faults()
    _assert_left_failed(fleet, failed, "phase Pending")
    _assert_converged(fleet, fleet.play(limit="flt-0", mig_config=layout))


def test_mig_parted_failure_leaves_the_node_cordoned_with_the_reason(fleet, tmp_path):
    hooks = tmp_path / "hooks.yaml"
    hooks.write_text("version: v1\nhooks:\n  apply-start:\n  - command: /bin/false\n    args: []\n")
    layout = _next_layout(fleet)
    failed = fleet.play(limit="flt-0", mig_config=layout, mig_parted_hooks_file=str(hooks), mig_gpu_clients=[])
    _assert_left_failed(fleet, failed, "apply-start hook")
    _assert_converged(fleet, fleet.play(limit="flt-0", mig_config=layout))


def test_api_errors_and_conflicts_are_retried(fleet):
    layout = _next_layout(fleet)
    fleet.add_fault("conflict", verb="update", resource="nodes", count=2)
    fleet.add_fault("error", verb="get", resource="nodes", status=503, count=2)
    fleet.add_fault("error", verb="create", resource="pods/eviction", status=500, count=1)
    try:
        _assert_converged(fleet, fleet.play(limit="flt-0", mig_config=layout))
    finally:
        fleet.clear_faults()


def test_host_lost_mid_rollout_is_a_failure_like_any_other(fleet, tmp_path):
    """#3: annotated, summarised, budget counted; the re-run converges once the host is back. The host is
    lost while mig-parted changes it (held at its apply-start hook), so the loss lands at one known step:
    the change it was making completes, the next step cannot reach it."""
    held = HeldApply(tmp_path, status=0)
    layout = _next_layout(fleet)
    run = fleet.start(mig_config=layout, gpufleet_rollout_max_fail_percentage=0, mig_parted_hooks_file=str(held.hooks))
    try:
        held.wait_started()
        fleet.set_reachable(False)
        held.release()
        run.wait(timeout=300)
    finally:
        held.release()
        fleet.set_reachable(True)
        if run.poll() is None:
            run.kill()
    assert run.returncode != 0
    node = fleet.node("flt-0")
    assert node["unschedulable"] and node["annotation"].startswith("failed: host unreachable"), node
    summary = fleet.summary()
    assert summary["flt-0"]["outcome"] == "unreachable"
    with open(fleet.dir + "/background.log", encoding="utf-8") as handle:
        assert "over the 0% budget: the rollout stops here" in flat(handle.read())
    assert _profiles(fleet) == sorted(EXPECTED[layout])  # the apply in flight when the host was lost
    # The host has the layout; the re-run's change is the node's (uncordoned, its reason cleared).
    _assert_converged(fleet, fleet.play(limit="flt-0", mig_config=layout))  # flt-1 was never started


def test_sigterm_mid_run_then_the_lease_expires_and_the_rerun_converges(fleet, tmp_path):
    """The killed run's Lease stays and refuses a re-run; once it has expired (its renewTime moved
    back past leaseDurationSeconds: no waiting, and no flakiness on a loaded machine) it is taken over.
    The run is killed while mig-parted is held at its apply-start hook (one known step); the hook then
    fails, so the killed run's apply changes nothing and the re-run makes the change."""
    held = HeldApply(tmp_path, status=1)
    layout = _next_layout(fleet)
    before = _profiles(fleet)
    run = fleet.start(limit="flt-0", mig_config=layout, gpufleet_rollout_lock_duration=300,
                      mig_parted_hooks_file=str(held.hooks))
    try:
        held.wait_started()
        run.send_signal(signal.SIGTERM)
        run.wait(timeout=60)
    finally:
        held.release()
        if run.poll() is None:
            run.kill()
    wait_until("the held apply on flt-0 ended", held.ended.exists, 30)
    assert _profiles(fleet) == before
    node = fleet.node("flt-0")
    assert node["unschedulable"] and node["annotation"].startswith("in progress"), node
    held = fleet.lease()
    assert held is not None
    try:
        refused = fleet.play(limit="flt-0", mig_config=layout)
        assert refused.returncode != 0 and "is held by" in flat(refused.stdout)
        held = fleet.lease()
        held["spec"]["renewTime"] = _micro(time.time() - held["spec"]["leaseDurationSeconds"] - 5)
        fleet.k8s.replace(held)
        _assert_converged(fleet, fleet.play(limit="flt-0", mig_config=layout))
    finally:
        fleet.k8s.delete("Lease", LEASE_NAME, namespace=LEASE_NS)  # whatever happened, later cases start free
    assert gpustate.load(fleet.hosts["flt-0"]["state_file"]).gpu(0).gpu_instances


def _micro(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + ".%06dZ" % int((seconds % 1) * 1e6)


def test_a_tampered_mig_manager_drop_in_is_repaired_without_a_drain(fleet):
    """#11: converged layout, tampered override.conf: repaired (changed), then changed=0."""
    drop_in = "%s/etc/systemd/system/nvidia-mig-manager.service.d/override.conf" % fleet.hosts["flt-1"]["host_dir"]
    with open(drop_in, encoding="utf-8") as handle:
        wanted = handle.read()
    with open(drop_in, "w", encoding="utf-8") as handle:
        handle.write("[Service]\nEnvironment=MIG_PARTED_SELECTED_CONFIG=all-disabled\n")
    repaired = fleet.play(limit="flt-1", mig_config=fleet.flt1_layout)
    output = flat(repaired.stdout + repaired.stderr)
    assert repaired.returncode == 0, output[-3000:]
    with open(drop_in, encoding="utf-8") as handle:
        assert handle.read() == wanted
    assert fleet.summary()["flt-1"]["outcome"] == "changed"
    assert "in progress" not in output  # no drain for a files-only repair
    again = fleet.play(limit="flt-1", mig_config=fleet.flt1_layout)
    assert again.returncode == 0 and fleet.summary()["flt-1"]["outcome"] == "unchanged"
    assert re.search(r"flt-1 *: ok=\d+ +changed=0 ", again.stdout), again.stdout[-2000:]


def test_a_run_that_changes_nothing_checks_the_lock_and_never_writes_it(fleet):
    """Issue 26: the lock is taken only when something must change. A converged node's re-run reads the
    Lease (a run beside a live holder is still refused: test_lock_held_by_another_run_...) but sends no
    write to it: no create, update or delete of a Lease in the lab API's request counts."""
    converged = fleet.play(limit="flt-1", mig_config=fleet.flt1_layout)
    assert converged.returncode == 0, flat(converged.stdout + converged.stderr)[-3000:]
    server.metrics(fleet.dir, reset=True)
    again = fleet.play(limit="flt-1", mig_config=fleet.flt1_layout)
    assert again.returncode == 0 and fleet.summary()["flt-1"]["outcome"] == "unchanged"
    leases = {key: count for key, count in server.metrics(fleet.dir)["requests"].items() if key.endswith("/leases")}
    assert leases and all(key.startswith("get ") for key in leases), leases
    assert fleet.lease() is None


def _host_plan_play(output: str) -> str:
    start = output.index("PLAY [Rollout - plan on the host the nodes without a usable read")
    return output[start:output.index("PLAY [", start + 1)]


def test_site_plans_from_the_preflight_read_and_repairs_a_tampered_drop_in(fleet):
    """Issue 14: in site.yml the rollout plans from the preflight's gpu_facts read (no mig_config run on
    the host in the plan play); a tampered drop-in is still seen, repaired, and the next run changes nothing."""
    drop_in = "%s/etc/systemd/system/nvidia-mig-manager.service.d/override.conf" % fleet.hosts["flt-1"]["host_dir"]
    with open(drop_in, encoding="utf-8") as handle:
        wanted = handle.read()
    with open(drop_in, "w", encoding="utf-8") as handle:
        handle.write("[Service]\nEnvironment=MIG_PARTED_SELECTED_CONFIG=all-disabled\n")
    repaired = fleet.play("site.yml", limit="flt-1", mig_config=fleet.flt1_layout)
    output = flat(repaired.stdout + repaired.stderr)
    assert repaired.returncode == 0, output[-3000:]
    host_plan_play = _host_plan_play(repaired.stdout)
    assert "skipping: no hosts matched" in host_plan_play and "MIG config" not in host_plan_play, host_plan_play
    with open(drop_in, encoding="utf-8") as handle:
        assert handle.read() == wanted
    assert fleet.summary()["flt-1"]["outcome"] == "changed"
    again = fleet.play("site.yml", limit="flt-1", mig_config=fleet.flt1_layout)
    assert again.returncode == 0 and fleet.summary()["flt-1"]["outcome"] == "unchanged"
    assert re.search(r"flt-1 *: ok=\d+ +changed=0 ", again.stdout), again.stdout[-2000:]


def test_site_plans_on_the_host_when_the_lock_was_taken_over(fleet):
    """The preflight reads the hosts before the lock is taken. When the lock is taken over from an
    expired holder (a run that stopped, maybe in the middle of a change), that read may be stale:
    every host then plans on the host, after the lock."""
    now = time.time()
    fleet.k8s.create({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                      "metadata": {"name": LEASE_NAME, "namespace": LEASE_NS},
                      "spec": {"holderIdentity": "run-y crashed@ctl-3", "acquireTime": _micro(now - 900),
                               "renewTime": _micro(now - 700), "leaseDurationSeconds": 600}})
    try:
        run = fleet.play("site.yml", limit="flt-1", mig_config=fleet.flt1_layout)
        assert run.returncode == 0, flat(run.stdout + run.stderr)[-3000:]
        host_plan_play = _host_plan_play(run.stdout)
        assert re.search(r"TASK \[gpufleet.sharing.mig : MIG config[^\n]*\n(ok|changed): \[flt-1\]", host_plan_play), host_plan_play
        assert fleet.summary()["flt-1"]["outcome"] == "unchanged" and fleet.lease() is None
    finally:
        fleet.k8s.delete("Lease", LEASE_NAME, namespace=LEASE_NS)


def test_gpu_pod_under_a_zero_budget_fails_the_drain_then_is_evicted_and_the_change_succeeds(fleet):
    """#2: a budget allowing no disruption stops the drain (pod named); without it the drain evicts the
    GPU workload and the MIG change goes through on the node that had it."""
    layout = _next_layout(fleet)
    owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "server-5d9f", "uid": "rs-server-1"}
    fleet.run_gpu_pod("server", owner=owner)
    pdb = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "server", "namespace": WORK_NS},
           "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "server"}}}}
    fleet.k8s.create(pdb)
    try:
        failed = fleet.play(limit="flt-0", mig_config=layout, gpufleet_drain_timeout=3)
        _assert_left_failed(fleet, failed, "work/server")
        assert "not evicted" in fleet.summary()["flt-0"]["reason"]
    finally:
        fleet.k8s.delete("PodDisruptionBudget", "server", namespace=WORK_NS)
    _assert_converged(fleet, fleet.play(limit="flt-0", mig_config=layout))
    assert fleet.k8s.get("Pod", "server", WORK_NS) is None  # evicted (the lab has no ReplicaSet controller)


def test_node_deleted_mid_run_fails_that_node_cleanly_and_the_others_go_on(fleet, tmp_path):
    """flt-0's Node is deleted while mig-parted changes its host (held at its apply-start hook, so the
    deletion lands at one known step whatever the machine's speed): the host takes the layout, the node
    fails with "not found", flt-1 goes on. The re-run finds the host done and the node registered again."""
    held = HeldApply(tmp_path, status=0)
    layout = _next_layout(fleet)
    run = fleet.start(mig_config=layout, mig_parted_hooks_file=str(held.hooks))
    deleted = False
    try:
        held.wait_started()
        assert fleet.node("flt-0")["unschedulable"]  # drained: the canary is flt-0
        fleet.k8s.delete("Node", "flt-0")
        deleted = True
        held.release()
        run.wait(timeout=300)
        # A running kubelet does not register its deleted Node again (the lab follows the kubelet).
        assert fleet.k8s.get("Node", "flt-0") is None
    finally:
        held.release()
        if run.poll() is None:
            run.kill()
        if deleted and fleet.k8s.get("Node", "flt-0") is None:
            fleet.restart_kubelet("flt-0")  # what an operator does: the kubelet registers the node again
    with open(fleet.dir + "/background.log", encoding="utf-8") as handle:
        log = flat(handle.read())
    assert run.returncode != 0, log[-3000:]
    summary = fleet.summary()
    assert summary["flt-0"]["outcome"] == "failed" and "not found" in summary["flt-0"]["reason"], summary
    assert summary["flt-1"]["outcome"] == "changed", summary
    # Issue 21 (12): say what happened to the node, not that it "stays cordoned with the reason".
    assert summary["flt-0"]["node_state"].startswith("deleted during the run: no Node object"), summary
    assert "stay cordoned" not in log and "flt-0: deleted during the run" in log, log[-3000:]
    assert fleet.lease() is None
    assert _profiles(fleet) == sorted(EXPECTED[layout])  # the host changed before the node was missed
    fleet.flt1_layout = layout
    _assert_converged(fleet, fleet.play(limit="flt-0", mig_config=layout), outcome="unchanged")


def test_failure_reason_refused_by_the_api_is_summarised_and_written_at_the_end(fleet, tmp_path):
    """Issue 21 (13): mig-parted fails on flt-0 while the API answers 500 to every write of the node (its
    failure reason): the node kept "in progress". The summary says so and the reason is written at the end."""
    held = HeldApply(tmp_path, status=1)
    layout = _next_layout(fleet)
    run = fleet.start(limit="flt-0", mig_config=layout, mig_parted_hooks_file=str(held.hooks), mig_gpu_clients=[])
    try:
        held.wait_started()
        # The next 6 node writes (one cordon with its annotation: the first try and the client's 5 retries).
        fleet.add_fault("error", verb="update", resource="nodes", name="flt-0", status=500, count=6)
        held.release()
        run.wait(timeout=300)
    finally:
        held.release()
        if run.poll() is None:
            run.kill()
        fleet.clear_faults()
    with open(fleet.dir + "/background.log", encoding="utf-8") as handle:
        log = flat(handle.read())
    assert run.returncode != 0, log[-3000:]
    row = fleet.summary()["flt-0"]
    assert row["outcome"] == "failed" and "apply-start hook" in row["reason"], row
    assert row["node_state"].startswith("cordoned, annotated with the reason at the end of the run (the first "
                                        "write was refused: "), row
    _assert_left_failed(fleet, run_result(run, log), "apply-start hook")
    _assert_converged(fleet, fleet.play(limit="flt-0", mig_config=layout))


def run_result(run, log: str):
    """A finished background run as _assert_left_failed reads a played one."""
    return type("Played", (), {"returncode": run.returncode, "stdout": log, "stderr": ""})()


MIG_NODE_CONFIG_PLAY = """
- hosts: flt-0
  gather_facts: false
  vars:
    mig_operator_node_name: flt-0
    mig_operator_configmap_name: default-mig-parted-config
    mig_operator_poll_interval: 0.3
    mig_operator_timeout: 20
    mig_operator_drain_timeout: 20
  tasks:
    - name: The operator backend's per-node step (roles/mig_operator, tasks nodes)
      ansible.builtin.include_role:
        name: gpufleet.sharing.mig_operator
        tasks_from: nodes
"""


def _mig_manager(lab, enabled: bool) -> None:
    """The operator backend's MIG manager on (no default config: it acts only on nodes we label) or off."""
    lab.k8s.patch("ClusterPolicy", "cluster-policy", {"spec": {"migManager": {"enabled": enabled, "config": {"default": ""}}}})
    if not enabled:
        lab.k8s.set_node_labels("flt-0", {"nvidia.com/mig.config": None, "nvidia.com/mig.config.state": None})
        return

    def running() -> bool:
        pods = lab.k8s.list("Pod", namespace="gpu-operator", label_selector="app=nvidia-mig-manager",
                            field_selector="spec.nodeName=flt-0")
        return any((p.get("status") or {}).get("phase") == "Running" for p in pods)
    wait_until("the MIG manager running on flt-0", running, 60)


def test_mig_manager_failed_leaves_the_node_cordoned_then_the_rerun_converges(fleet, tmp_path):
    """Operator backend (mig_node_config): state=failed keeps the node cordoned with the reason."""
    play = tmp_path / "mig-node-config.yml"
    play.write_text(MIG_NODE_CONFIG_PLAY)
    layout = _next_layout(fleet)
    _mig_manager(fleet, True)
    try:
        fleet.add_fault("named", condition="mig-manager-fail", count=None)
        try:
            failed = fleet.play(str(play), mig_config=layout)
        finally:
            fleet.clear_faults()
        output = flat(failed.stdout + failed.stderr)
        assert failed.returncode != 0
        assert "fault injected: mig-manager-fail" in output and "stays cordoned" in output, output[-3000:]
        node = fleet.k8s.get("Node", "flt-0")
        assert node["spec"].get("unschedulable") is True
        assert node["metadata"]["labels"]["nvidia.com/mig.config.state"] == "failed"
        assert "gpufleet.sharing/cordoned-by" in node["metadata"]["annotations"]
        reason = node["metadata"]["annotations"].get("gpufleet.sharing/rollout") or ""
        assert reason.startswith("failed: ") and "mig-manager-fail" in reason, reason  # the reason stays on the node
        again = fleet.play(str(play), mig_config=layout)
        assert again.returncode == 0, flat(again.stdout + again.stderr)[-3000:]
        assert fleet.node("flt-0") == {"unschedulable": False, "annotation": None}
        assert _profiles(fleet) == sorted(EXPECTED[layout])
    finally:
        _mig_manager(fleet, False)
