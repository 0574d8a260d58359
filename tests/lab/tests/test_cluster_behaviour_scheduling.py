"""Pure parts of the scheduler and kubelet, and the operator's default mig-parted ConfigMap."""

from __future__ import annotations

import pytest

from gpulab import gpustate, migparted
from gpulab.cluster import allocation, containers, devices, manager, pluginconfig, scheduler
from gpulab.cluster.operator import common as operands
from gpulab.cluster.operator.migconfig import default_mig_parted_config
from gpulab.models import load_model


def node(name="n1", labels=None, allocatable=None, taints=None, unschedulable=False):
    spec = {"taints": taints or []}
    if unschedulable:
        spec["unschedulable"] = True
    return {"metadata": {"name": name, "labels": labels or {}}, "spec": spec,
            "status": {"allocatable": allocatable or {"cpu": "8", "memory": "32Gi", "pods": "110"}}}


def pod(limits=None, **spec):
    body = {"containers": [{"name": "c", "image": "busybox", "resources": {"limits": limits or {}}}]}
    body.update(spec)
    return {"metadata": {"name": "p", "namespace": "default"}, "spec": body}


@pytest.mark.parametrize("text, value", [("500m", 0.5), ("2", 2.0), ("1Gi", 1024 ** 3), ("1e3", 1000.0), (3, 3.0), ("bad", 0.0)])
def test_parse_quantity(text, value):
    assert scheduler.parse_quantity(text) == value


def test_node_reasons_in_filter_order():
    gpu = {"nvidia.com/gpu": "1"}
    assert scheduler.node_reasons(pod(gpu), node(allocatable={"nvidia.com/gpu": "1"}), {}) == []
    assert scheduler.node_reasons(pod(gpu), node(allocatable={}), {}) == ["Insufficient nvidia.com/gpu"]
    assert scheduler.node_reasons(pod(gpu), node(allocatable={"nvidia.com/gpu": "1"}), {"nvidia.com/gpu": 1}) == ["Insufficient nvidia.com/gpu"]
    cordoned = node(allocatable={}, unschedulable=True)
    assert scheduler.node_reasons(pod(gpu), cordoned, {}) == ["node(s) were unschedulable"]
    tolerating = pod(gpu, tolerations=[{"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}])
    assert scheduler.node_reasons(tolerating, cordoned, {}) == ["Insufficient nvidia.com/gpu"]
    tainted = node(taints=[{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}])
    assert scheduler.node_reasons(pod(), tainted, {}) == ["node(s) had untolerated taint {nvidia.com/gpu: present}"]
    assert scheduler.node_reasons(pod(tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]), tainted, {}) == []
    prefer = node(taints=[{"key": "x", "effect": "PreferNoSchedule"}])
    assert scheduler.node_reasons(pod(), prefer, {}) == []
    assert scheduler.node_reasons(pod(nodeSelector={"pool": "h100"}), node(labels={"pool": "a100"}), {}) == \
        ["node(s) didn't match Pod's node affinity/selector"]


def test_required_node_affinity():
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "nvidia.com/gpu.count", "operator": "Gt", "values": ["3"]},
                              {"key": "pool", "operator": "NotIn", "values": ["old"]}]}]}}}
    assert scheduler.matches_node_selection(pod(affinity=affinity), node(labels={"nvidia.com/gpu.count": "8"}))
    assert not scheduler.matches_node_selection(pod(affinity=affinity), node(labels={"nvidia.com/gpu.count": "2"}))
    assert not scheduler.matches_node_selection(pod(affinity=affinity), node(labels={"nvidia.com/gpu.count": "8", "pool": "old"}))


def test_fit_error_message_wording():
    message = scheduler.fit_error_message(3, {"a": ["Insufficient nvidia.com/mig-1g.10gb"], "b": ["Insufficient nvidia.com/mig-1g.10gb"],
                                              "c": ["Insufficient nvidia.com/mig-1g.10gb"]})
    assert message == ("0/3 nodes are available: 3 Insufficient nvidia.com/mig-1g.10gb. preemption: 0/3 nodes are available: "
                       "3 No preemption victims found for incoming pod.")
    mixed = scheduler.fit_error_message(3, {"a": ["node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }"],
                                            "b": ["Insufficient nvidia.com/gpu"], "c": ["Insufficient nvidia.com/gpu"]})
    assert mixed.startswith("0/3 nodes are available: 1 node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }, "
                            "2 Insufficient nvidia.com/gpu.")
    assert "1 Preemption is not helpful for scheduling" in mixed


@pytest.mark.parametrize("command, expected", [
    (["nvidia-smi", "-L"], True),
    (["/usr/bin/nvidia-smi", "--list-gpus"], True),
    (["sh", "-c", "nvidia-smi -L; sleep 5"], True),
    (["bash", "-c", "nvidia-smi -L && echo done"], True),
    (["nvidia-smi"], False),
    (["sleep", "1d"], False),
])
def test_nvidia_smi_list_detection(command, expected):
    assert containers.runs_nvidia_smi_list({"command": command}) is expected


def test_spread_pick_prefers_idle_physical_devices():
    gpus = [devices.Device(f"GPU-{g}::{n}", "nvidia.com/gpu", g, "X", f"GPU-{g}", replica=n) for g in range(2) for n in range(2)]
    picked = allocation.spread_pick(gpus, set(), 2)
    assert {d.gpu_uuid for d in picked} == {"GPU-0", "GPU-1"}
    third = allocation.spread_pick(gpus, {d.id for d in picked}, 1)
    assert third is not None and third[0].id not in {d.id for d in picked}
    assert allocation.spread_pick(gpus, {d.id for d in gpus}, 1) is None


def test_packed_allocation_policy_fills_one_gpu_first():
    """docs/reference/specs.md §9.11 (k8s-device-plugin PR #1621: packed bin-packs replicated and MIG
    devices onto the fewest GPUs; distributed, the default, spreads them)."""
    config = pluginconfig.parse_plugin_config(
        "version: v1\nflags:\n  plugin:\n    sharedDevicesAllocationPolicy: packed\n"
        "sharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 2\n")
    assert config.allocation_policy == "packed"
    gpus = [devices.Device(f"GPU-{g}::{n}", "nvidia.com/gpu", g, "X", f"GPU-{g}", replica=n) for g in range(2) for n in range(2)]
    first = allocation.spread_pick(gpus, set(), 1, packed=True)
    second = allocation.spread_pick(gpus, {d.id for d in first}, 1, packed=True)
    assert first[0].gpu_uuid == second[0].gpu_uuid == "GPU-0"
    migs = [devices.Device(f"MIG-{g}-{n}", "nvidia.com/mig-1g.10gb", g, "X", f"GPU-{g}", mig_uuid=f"MIG-{g}-{n}")
            for g in range(2) for n in range(2)]
    taken = {"MIG-1-0"}
    assert allocation.spread_pick(migs, taken, 1, packed=True)[0].id == "MIG-1-1"
    assert allocation.spread_pick(migs, taken, 1)[0].gpu_uuid == "GPU-0"
    with pytest.raises(pluginconfig.PluginConfigError, match="unknown allocation policy: spread"):
        pluginconfig.parse_plugin_config("version: v1\nflags:\n  plugin:\n    sharedDevicesAllocationPolicy: spread\n")


def test_operator_settings_from_env():
    settings = manager.Settings.from_env({"GPULAB_OPERAND_START_DELAY": "2", "GPULAB_NAMESPACE": "nvidia-gpu-operator"})
    assert settings.operand_start_delay == 2.0 and settings.namespace == "nvidia-gpu-operator"


def test_mig_strategy_and_default_config_defaults():
    assert operands.mig_strategy({}) is None  # no MIG_STRATEGY: each node's config decides (issue 25)
    assert operands.mig_strategy({"mig": {"strategy": "mixed"}}) == "mixed"
    assert operands.mig_default_config({}) == "all-disabled"
    assert operands.mig_default_config({"migManager": {"config": {"default": ""}}}) == ""


CONFIG = default_mig_parted_config()


def test_default_mig_parted_config_is_valid_v1():
    parsed = migparted.parse_config(CONFIG)
    assert {"all-disabled", "all-enabled", "all-balanced", "all-1g.10gb", "all-1g.10gb.me", "all-3g.71gb", "all-4g.24gb"} <= set(parsed)


@pytest.mark.parametrize("model", ["A30", "A100-40GB", "A100-80GB", "H100-80GB", "H100-NVL", "H200"])
def test_default_configs_apply_on_every_lab_model(tmp_path, model):
    """all-balanced and every all-<profile> entry of the model apply and assert on that model."""
    names = ["all-balanced"] + ["all-" + p.name.replace("+", ".") for p in load_model(model).profiles]
    path = str(tmp_path / "host.json")
    for name in names:
        gpustate.create(path, "host", [(model, 1)])
        ok, message = migparted.apply_config(path, CONFIG, name)
        assert ok, f"{model} {name}: {message}"
        assert migparted.assert_config(path, CONFIG, name)[0]
        state = gpustate.load(path)
        assert state.gpus[0].gpu_instances, f"{model} {name}: nothing created"
