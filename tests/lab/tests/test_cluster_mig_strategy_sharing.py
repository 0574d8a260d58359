"""The MIG strategy a device plugin runs with, and what it does then with each sharing kind (issue 25 part 2).

As NVIDIA/k8s-device-plugin v0.17.0-v0.20.0: the strategy comes from MIG_STRATEGY (set by the GPU
Operator from ClusterPolicy spec.mig.strategy unless that is empty: NVIDIA/gpu-operator
controllers/object_controls.go applyMIGConfiguration, v26.7.0), else the config file's
flags.migStrategy, else none (api/config/v1/config.go NewConfig); a config that shares with MPS under
the mixed strategy stops the plugin before it enumerates anything (cmd/nvidia-device-plugin/main.go
validateFlags). Pure model first, then the operator's pods in-process.
"""

from __future__ import annotations

import pytest

from gpulab.cluster import devices, pluginconfig
from test_cluster_behaviour_devices import host, set_mig
from test_cluster_behaviour_operator import NS, make_lab, wait_for  # noqa: F401  # pylint: disable=unused-import

MPS4 = "version: v1\n{flags}sharing:\n  mps:\n{rename}    resources:\n    - name: nvidia.com/gpu\n      replicas: 4\n"
TS4 = MPS4.replace("mps:", "timeSlicing:")


def cfg(kind: str, strategy: str = "", rename: bool = False) -> pluginconfig.SharingConfig:
    flags = f"flags:\n  migStrategy: {strategy}\n" if strategy else ""
    text = {"mps": MPS4, "ts": TS4}[kind].format(flags=flags, rename="    renameByDefault: true\n" if rename else "")
    return pluginconfig.parse_plugin_config(text)


@pytest.mark.parametrize("env, flags, expected", [
    (None, "", "none"), (None, "mixed", "mixed"), (None, "single", "single"), (None, "none", "none"),
    ("mixed", "none", "mixed"), ("single", "mixed", "single"), ("none", "mixed", "none"), ("mixed", "", "mixed"),
])
def test_environment_beats_the_config_file_which_beats_the_default(env, flags, expected):
    assert devices.effective_mig_strategy(env, cfg("ts", flags)) == expected


def _h200(count: int = 2):
    return devices.gpu_views(host([("H200", count)]))


@pytest.mark.parametrize("strategy", ["none", "single", "mixed"])
@pytest.mark.parametrize("kind", ["none", "ts", "mps"])
@pytest.mark.parametrize("rename", [False, True])
def test_every_strategy_and_sharing_on_whole_gpus(strategy, kind, rename):
    sharing = pluginconfig.NO_SHARING if kind == "none" else cfg(kind, rename=rename)
    result = devices.compute_node(_h200(), strategy, sharing)
    if kind == "mps" and strategy == "mixed":
        assert result.plugin_error == devices.MPS_MIXED_ERROR
        assert result.resources == {} and result.devices == {}
        # GFD does not validate it and labels the node as configured
        assert result.labels["nvidia.com/mps.capable"] == "true"
        return
    assert result.plugin_error is None
    name = "nvidia.com/gpu.shared" if rename and kind != "none" else "nvidia.com/gpu"
    assert result.resources == {name: 2 if kind == "none" else 8}
    product = result.labels["nvidia.com/gpu.product"]
    assert product == "NVIDIA-H200" + ("-SHARED" if kind != "none" and not rename else "")
    assert result.labels.get("nvidia.com/mig.strategy") == (None if strategy == "none" else strategy)


def test_mps_under_mixed_is_refused_even_without_any_mig_device_and_with_flags_saying_none():
    sharing = cfg("mps", "none")  # the environment wins over the file
    strategy = devices.effective_mig_strategy("mixed", sharing)
    assert devices.compute_node(_h200(), strategy, sharing).plugin_error == devices.MPS_MIXED_ERROR
    assert devices.compute_node(_h200(), devices.effective_mig_strategy(None, sharing), sharing).resources == {"nvidia.com/gpu": 8}


def test_mps_on_mig_devices_under_single_names_the_real_error():
    state = host([("H200", 1)])
    set_mig(state, 0, ["1g.18gb"] * 7)
    result = devices.compute_node(devices.gpu_views(state), "single", cfg("mps"))
    assert result.plugin_error == devices.MPS_MIG_ERROR


def test_time_slicing_mig_devices_under_mixed_still_works():
    state = host([("A100-40GB", 1)])
    set_mig(state, 0, ["1g.5gb", "1g.5gb", "2g.10gb", "3g.20gb"])
    text = ("version: v1\nflags:\n  migStrategy: mixed\nsharing:\n  timeSlicing:\n    resources:\n"
            "    - name: nvidia.com/mig-1g.5gb\n      replicas: 2\n")
    result = devices.compute_node(devices.gpu_views(state), "mixed", pluginconfig.parse_plugin_config(text))
    assert result.resources == {"nvidia.com/mig-1g.5gb": 4, "nvidia.com/mig-2g.10gb": 1, "nvidia.com/mig-3g.20gb": 1}


def _crashed_plugin(lab):
    pods = lab.operand_pods("nvidia-device-plugin-daemonset")
    statuses = (pods[0].get("status") or {}).get("containerStatuses") or [] if pods else []
    return statuses and statuses[0]["state"].get("waiting", {}).get("reason") == "CrashLoopBackOff" and pods[0]


def test_operator_mixed_strategy_with_an_mps_config_crash_loops_the_plugin(make_lab):
    lab = make_lab({"gpu-a": [("H200", 2)]})
    lab.configmap("cfg", {"mps": MPS4.format(flags="flags:\n  migStrategy: none\n", rename="")})
    lab.policy({"devicePlugin": {"config": {"name": "cfg", "default": "mps"}}, "mig": {"strategy": "mixed"}})
    pod = wait_for("CrashLoopBackOff", lambda: _crashed_plugin(lab))
    assert pod["status"]["containerStatuses"][0]["lastState"]["terminated"]["message"] == devices.MPS_MIXED_ERROR
    log = lab.store.get_pod_log(NS, pod["metadata"]["name"])
    assert devices.MPS_MIXED_ERROR in log and "level=error" in log
    assert lab.allocatable("gpu-a") == {} and lab.capacity("gpu-a") == {}  # the plugin never registered
    assert lab.policy_state() == "notReady"


def test_operator_without_a_strategy_lets_each_config_choose(make_lab):
    lab = make_lab({"gpu-a": [("H200", 2)], "gpu-b": [("A100-40GB", 1)]})
    lab.configmap("cfg", {"mps": MPS4.format(flags="flags:\n  migStrategy: none\n", rename=""),
                          "mig": "version: v1\nflags:\n  migStrategy: mixed\n"})
    lab.label("gpu-a", "nvidia.com/device-plugin.config", "mps")
    lab.label("gpu-b", "nvidia.com/device-plugin.config", "mig")
    lab.policy({"devicePlugin": {"config": {"name": "cfg"}}, "mig": {}})
    plugin = wait_for("plugin pod", lambda: lab.operand_pods("nvidia-device-plugin-daemonset", "gpu-a"))[0]
    env = {e["name"]: e.get("value") for e in plugin["spec"]["containers"][0]["env"]}
    assert "MIG_STRATEGY" not in env and env["NVIDIA_MIG_MONITOR_DEVICES"] == "all"
    wait_for("MPS replicas", lambda: lab.allocatable("gpu-a") == {"nvidia.com/gpu": "8"})
    wait_for("initial MIG state", lambda: lab.labels("gpu-b").get("nvidia.com/mig.config.state") == "success")
    lab.label("gpu-b", "nvidia.com/mig.config", "all-1g.5gb")
    wait_for("MIG devices, mixed", lambda: lab.allocatable("gpu-b") == {"nvidia.com/gpu": "0", "nvidia.com/mig-1g.5gb": "7"},
             timeout=15)
    wait_for("GFD mixed label", lambda: lab.labels("gpu-b").get("nvidia.com/mig.strategy") == "mixed")
    assert "nvidia.com/mig.strategy" not in lab.labels("gpu-a")
    lab.wait_ready()
