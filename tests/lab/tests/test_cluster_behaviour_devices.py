"""What a GPU node advertises (gpulab.cluster.devices): the examples of docs/reference/specs.md, pure, no server."""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

import pytest

from gpulab import gpustate
from gpulab.cluster import devices, pluginconfig

TS4 = """
version: v1
sharing:
  timeSlicing:
    resources:
    - name: nvidia.com/gpu
      replicas: 4
"""

TS4_RENAMED = """
version: v1
sharing:
  timeSlicing:
    renameByDefault: true
    resources:
    - name: nvidia.com/gpu
      replicas: 4
"""

# docs/reference/specs.md §10, time-slicing-config-fine.yaml key a100-40gb.
FINE_A100_40GB = """
version: v1
flags:
  migStrategy: mixed
sharing:
  timeSlicing:
    resources:
    - name: nvidia.com/gpu
      replicas: 8
    - name: nvidia.com/mig-1g.5gb
      replicas: 2
    - name: nvidia.com/mig-2g.10gb
      replicas: 2
    - name: nvidia.com/mig-3g.20gb
      replicas: 3
    - name: nvidia.com/mig-7g.40gb
      replicas: 7
"""

# CI profile enum by compute slices (docs/reference/specs.md §1.3), enough for the layouts below.
_CI_PROFILE_ID = {1: 0, 2: 1, 3: 2, 4: 3, 7: 4}


def host(models: Sequence[Tuple[str, int]], name: str = "node-a") -> gpustate.HostState:
    return gpustate.new_state(name, list(models))


def set_mig(state: gpustate.HostState, index: int, profiles: Sequence[str], compute: Optional[Dict[str, str]] = None) -> None:
    """Put GPU `index` in MIG mode with one GI per profile (placements are irrelevant here).

    `compute` maps a GI profile to a partial compute-instance profile (e.g. "3g.20gb" -> "1c.3g.20gb").
    """
    gpu = state.gpu(index)
    gpu.mig_current = gpu.mig_pending = True
    gpu.gpu_instances = []
    for gi_id, profile in enumerate(profiles, start=1):
        g = devices.profile_slices(profile)[0]
        ci_profile = (compute or {}).get(profile, profile)
        c = devices.profile_slices(ci_profile)[1]
        ci = gpustate.ComputeInstance(0, _CI_PROFILE_ID.get(c, 0), ci_profile, gpustate.mig_uuid(gpu.uuid, gi_id, 0, gi_id))
        gpu.gpu_instances.append(gpustate.GpuInstance(gi_id, 0, profile, gi_id - 1, g, [ci]))


def node(state: gpustate.HostState, strategy: str, config: Optional[str] = None) -> devices.NodeDevices:
    return devices.compute_node_from_config(devices.gpu_views(state), strategy, config, state.driver_version)


def gpu_labels(result: devices.NodeDevices, prefix: str) -> Dict[str, str]:
    return {key[len(prefix):]: value for key, value in result.labels.items() if key.startswith(prefix)}


# ------------------------------------------------------------------------------ time-slicing / MPS


def test_time_slicing_replicas_4_on_8_h100():
    result = node(host([("H100-80GB", 8)]), "none", TS4)
    assert result.plugin_error is None
    assert result.resources == {"nvidia.com/gpu": 32}
    assert result.labels["nvidia.com/gpu.replicas"] == "4"
    assert result.labels["nvidia.com/gpu.count"] == "8"
    assert result.labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3-SHARED"
    assert result.labels["nvidia.com/gpu.sharing-strategy"] == "time-slicing"
    assert result.labels["nvidia.com/gpu.memory"] == "81559"
    assert result.labels["nvidia.com/gpu.family"] == "hopper"
    assert "nvidia.com/mig.strategy" not in result.labels  # only when strategy != none (docs/reference/specs.md §8)
    ids = [device.id for device in result.devices["nvidia.com/gpu"]]
    assert len(set(ids)) == 32
    uuid0 = result.devices["nvidia.com/gpu"][0].gpu_uuid
    assert [i for i in ids if i.startswith(uuid0)] == [f"{uuid0}::{n}" for n in range(4)]


def test_time_slicing_rename_by_default():
    result = node(host([("H100-80GB", 8)]), "none", TS4_RENAMED)
    assert result.resources == {"nvidia.com/gpu.shared": 32}
    assert result.labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"  # no -SHARED when renamed
    assert result.labels["nvidia.com/gpu.replicas"] == "4"


def test_no_config_means_one_device_per_gpu():
    result = node(host([("H100-80GB", 2)]), "none", None)
    assert result.resources == {"nvidia.com/gpu": 2}
    assert result.labels["nvidia.com/gpu.replicas"] == "1"
    assert result.labels["nvidia.com/gpu.sharing-strategy"] == "none"
    assert result.labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
    assert result.labels["nvidia.com/mig.capable"] == "true"
    assert result.labels["nvidia.com/mps.capable"] == "false"


def test_mps_replicas_and_request_limit():
    config = "version: v1\nsharing:\n  mps:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 10\n"
    result = node(host([("H100-80GB", 8)]), "none", config)
    assert result.resources == {"nvidia.com/gpu": 80}  # docs/reference/specs.md §9.3
    assert result.labels["nvidia.com/gpu.sharing-strategy"] == "mps"
    assert result.labels["nvidia.com/mps.capable"] == "true"
    assert result.max_request("nvidia.com/gpu") == 1  # MPS defaults failRequestsGreaterThanOne (docs/reference/specs.md §9.2)
    assert node(host([("H100-80GB", 1)]), "none", TS4).max_request("nvidia.com/gpu") is None


def test_mps_on_mig_devices_fails_the_plugin():
    state = host([("H100-80GB", 1)])
    set_mig(state, 0, ["1g.10gb"] * 7)
    config = "version: v1\nsharing:\n  mps:\n    resources:\n    - name: gpu\n      replicas: 2\n"
    result = node(state, "single", config)
    assert result.plugin_error and "MPS" in result.plugin_error
    assert result.resources == {}


def test_non_mig_gpu_labels():
    result = node(host([("A10", 2)]), "single", None)
    assert result.resources == {"nvidia.com/gpu": 2}
    assert result.labels["nvidia.com/mig.capable"] == "false"
    assert result.labels["nvidia.com/gpu.product"] == "NVIDIA-A10"
    assert result.labels["nvidia.com/mig.strategy"] == "single"


# ------------------------------------------------------------------------------ MIG strategies


def test_mixed_all_balanced_h100():
    state = host([("H100-80GB", 1)])
    set_mig(state, 0, ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"])
    result = node(state, "mixed")
    assert result.resources == {"nvidia.com/mig-1g.10gb": 2, "nvidia.com/mig-2g.20gb": 1, "nvidia.com/mig-3g.40gb": 1}
    # The real GFD output of docs/reference/specs.md §8 (values that do not depend on the driver version).
    expected = {
        "nvidia.com/gpu.count": "1",
        "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
        "nvidia.com/gpu.replicas": "0",
        "nvidia.com/gpu.sharing-strategy": "none",
        "nvidia.com/mig-1g.10gb.count": "2",
        "nvidia.com/mig-1g.10gb.memory": "9984",
        "nvidia.com/mig-1g.10gb.multiprocessors": "16",
        "nvidia.com/mig-1g.10gb.product": "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb",
        "nvidia.com/mig-1g.10gb.replicas": "1",
        "nvidia.com/mig-1g.10gb.slices.ci": "1",
        "nvidia.com/mig-1g.10gb.slices.gi": "1",
        "nvidia.com/mig-2g.20gb.count": "1",
        "nvidia.com/mig-2g.20gb.memory": "20096",
        "nvidia.com/mig-2g.20gb.multiprocessors": "32",
        "nvidia.com/mig-3g.40gb.count": "1",
        "nvidia.com/mig-3g.40gb.multiprocessors": "60",
        "nvidia.com/mig.capable": "true",
        "nvidia.com/mig.strategy": "mixed",
        "nvidia.com/mps.capable": "false",
    }
    assert {key: result.labels.get(key) for key in expected} == expected
    assert result.labels["nvidia.com/mig-3g.40gb.slices.gi"] == "3"
    assert result.labels["nvidia.com/mig-2g.20gb.sharing-strategy"] == "none"
    assert "nvidia.com/gpu" not in result.resources  # no full GPU left

    (device,) = result.devices["nvidia.com/mig-2g.20gb"]
    gpu = state.gpu(0)
    lines = devices.render_smi_list([device]).splitlines()
    assert lines[0] == f"GPU 0: NVIDIA H100 80GB HBM3 (UUID: {gpu.uuid})"
    assert lines[1] == f"  MIG 2g.20gb     Device  0: (UUID: {device.mig_uuid})"
    assert device.id == device.mig_uuid and device.mig_uuid.startswith("MIG-")


def test_spec_fine_grained_a100_example():
    """docs/reference/specs.md §10: A100-40GB all-balanced with the fine-grained time-slicing config."""
    state = host([("A100-40GB", 1)])
    set_mig(state, 0, ["3g.20gb", "2g.10gb", "1g.5gb", "1g.5gb"])
    result = node(state, "mixed", FINE_A100_40GB)
    assert result.resources == {"nvidia.com/mig-1g.5gb": 4, "nvidia.com/mig-2g.10gb": 2, "nvidia.com/mig-3g.20gb": 3}
    assert result.labels["nvidia.com/mig-1g.5gb.replicas"] == "2"
    assert result.labels["nvidia.com/mig-1g.5gb.sharing-strategy"] == "time-slicing"
    assert result.labels["nvidia.com/mig-1g.5gb.product"] == "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb-SHARED"
    assert result.labels["nvidia.com/mig-1g.5gb.count"] == "2"  # physical
    assert result.labels["nvidia.com/mig-3g.20gb.replicas"] == "3"
    assert "nvidia.com/mig-7g.40gb.count" not in result.labels  # listed but absent: skipped
    assert any("mig-7g.40gb" in line for line in result.log)

    renamed = node(state, "mixed", FINE_A100_40GB.replace("timeSlicing:", "timeSlicing:\n    renameByDefault: true"))
    assert renamed.resources == {
        "nvidia.com/mig-1g.5gb.shared": 4,
        "nvidia.com/mig-2g.10gb.shared": 2,
        "nvidia.com/mig-3g.20gb.shared": 3,
    }
    assert renamed.labels["nvidia.com/mig-1g.5gb.product"] == "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb"


def test_configmap_strategy_is_overridden_by_clusterpolicy():
    """flags.migStrategy: mixed in the ConfigMap, ClusterPolicy single wins (docs/reference/specs.md §7.3, §10)."""
    state = host([("A100-40GB", 1)])
    set_mig(state, 0, ["1g.5gb"] * 7)
    result = node(state, "single", FINE_A100_40GB)
    assert result.resources == {"nvidia.com/gpu": 56}  # 7 MIG devices x 8 replicas of nvidia.com/gpu
    assert result.labels["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb-SHARED"


def test_single_strategy_valid_and_shared():
    state = host([("H100-80GB", 1)])
    set_mig(state, 0, ["1g.10gb"] * 7)
    result = node(state, "single")
    assert result.resources == {"nvidia.com/gpu": 7}
    assert result.labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb"
    assert result.labels["nvidia.com/gpu.count"] == "7"
    assert result.labels["nvidia.com/gpu.slices.gi"] == "1"
    assert result.labels["nvidia.com/gpu.slices.ci"] == "1"
    assert result.labels["nvidia.com/gpu.memory"] == "9984"
    assert result.labels["nvidia.com/gpu.multiprocessors"] == "16"
    assert result.labels["nvidia.com/gpu.replicas"] == "1"
    assert result.labels["nvidia.com/mig.strategy"] == "single"

    shared = node(state, "single", TS4.replace("replicas: 4", "replicas: 2"))
    assert shared.resources == {"nvidia.com/gpu": 14}
    assert shared.labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb-SHARED"
    assert shared.labels["nvidia.com/gpu.replicas"] == "2"


def test_single_strategy_all_3g_on_8_a100():
    state = host([("A100-40GB", 8)])
    for index in range(8):
        set_mig(state, index, ["3g.20gb", "3g.20gb"])
    result = node(state, "single")
    assert result.resources == {"nvidia.com/gpu": 16}
    assert result.labels["nvidia.com/gpu.count"] == "16"
    assert result.labels["nvidia.com/gpu.slices.gi"] == "3"
    assert result.labels["nvidia.com/gpu.sharing-strategy"] == "none"


def test_single_strategy_invalid_mixed_modes():
    state = host([("H100-80GB", 2)])
    set_mig(state, 0, ["1g.10gb"] * 7)
    result = node(state, "single")
    assert result.labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3-MIG-INVALID"
    assert result.labels["nvidia.com/gpu.count"] == "0"
    assert result.labels["nvidia.com/gpu.replicas"] == "0"
    assert result.plugin_error and "same migEnabled value" in result.plugin_error
    assert result.resources == {}


def test_single_strategy_invalid_several_profiles():
    state = host([("H100-80GB", 1)])
    set_mig(state, 0, ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"])
    result = node(state, "single")
    assert result.labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3-MIG-INVALID"
    assert result.labels["nvidia.com/gpu.count"] == "0"
    assert result.plugin_error and "more than one MIG device type" in result.plugin_error


def test_single_strategy_mig_enabled_without_devices_is_invalid_label():
    state = host([("H100-80GB", 1)])
    set_mig(state, 0, [])
    result = node(state, "single")
    assert result.labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3-MIG-INVALID"
    assert result.resources == {}


def test_none_strategy_ignores_mig_mode():
    state = host([("H100-80GB", 2)])
    set_mig(state, 0, ["1g.10gb"] * 7)
    result = node(state, "none")
    assert result.resources == {"nvidia.com/gpu": 2}
    assert result.labels["nvidia.com/gpu.count"] == "2"


def test_single_strategy_invalid_layout_labels_match_gfd():
    """docs/reference/specs.md §8.1 (k8s-device-plugin internal/lm/mig-strategy.go,
    newInvalidMigStrategyLabeler, and its tests): memory 0 and an empty sharing strategy."""
    state = host([("H100-80GB", 2)])
    set_mig(state, 0, ["1g.10gb"] * 7)
    set_mig(state, 1, ["3g.40gb", "3g.40gb"])
    labels = node(state, "single", TS4).labels
    assert {key: labels[key] for key in ("nvidia.com/gpu.product", "nvidia.com/gpu.count", "nvidia.com/gpu.replicas",
                                         "nvidia.com/gpu.memory", "nvidia.com/gpu.sharing-strategy")} == {
        "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3-MIG-INVALID", "nvidia.com/gpu.count": "0",
        "nvidia.com/gpu.replicas": "0", "nvidia.com/gpu.memory": "0", "nvidia.com/gpu.sharing-strategy": ""}


def test_none_strategy_every_gpu_mig_enabled_is_labelled_without_sharing():
    """docs/reference/specs.md §8.2 (internal/lm/mig-strategy.go newGPULabelers: MIG-enabled GPUs get
    NewGPUResourceLabelerWithoutSharing; mig-strategy_test.go "sharing is not applied to muliple MIG
    device; replicas is zero"): the plugin still time-slices every GPU, GFD shows no sharing."""
    state = host([("H100-80GB", 2)])
    set_mig(state, 0, ["1g.10gb"] * 7)
    set_mig(state, 1, ["3g.40gb", "3g.40gb"])
    result = node(state, "none", TS4)
    assert result.resources == {"nvidia.com/gpu": 8}
    assert (result.labels["nvidia.com/gpu.count"], result.labels["nvidia.com/gpu.replicas"],
            result.labels["nvidia.com/gpu.sharing-strategy"], result.labels["nvidia.com/gpu.product"]) == (
        "2", "0", "none", "NVIDIA-H100-80GB-HBM3")
    one_full = host([("H100-80GB", 2)])
    set_mig(one_full, 0, ["1g.10gb"] * 7)
    labels = node(one_full, "none", TS4).labels  # a full GPU of the same name wins: shared labels
    assert (labels["nvidia.com/gpu.replicas"], labels["nvidia.com/gpu.product"]) == ("4", "NVIDIA-H100-80GB-HBM3-SHARED")


def test_mixed_full_gpus_and_mig_gpus_and_partial_ci():
    state = host([("A100-80GB", 2)])
    set_mig(state, 0, ["3g.40gb", "3g.40gb"], compute={"3g.40gb": "1c.3g.40gb"})
    result = node(state, "mixed", TS4)
    # The partial compute instances are not exposed under mixed; GPU 1 is a full GPU, shared x4.
    assert result.resources == {"nvidia.com/gpu": 4}
    assert result.labels["nvidia.com/gpu.count"] == "2"
    assert result.labels["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-80GB-SHARED"
    assert not any(key.startswith("nvidia.com/mig-") for key in result.labels)


def test_me_profile_resource_name_and_a30_balanced():
    state = host([("A30", 1)])
    set_mig(state, 0, ["2g.12gb", "1g.6gb", "1g.6gb+me"])
    result = node(state, "mixed")
    assert result.resources == {"nvidia.com/mig-1g.6gb": 1, "nvidia.com/mig-1g.6gb.me": 1, "nvidia.com/mig-2g.12gb": 1}
    assert result.labels["nvidia.com/mig-1g.6gb.me.engines.jpeg"] == "1"
    assert result.labels["nvidia.com/mig-2g.12gb.memory"] == str(devices.gib_to_mib(11.69))


def test_mixed_time_sliced_mig_allocation_ids():
    state = host([("H100-80GB", 1)])
    set_mig(state, 0, ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"])
    config = "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: mig-1g.10gb\n      replicas: 3\n"
    result = node(state, "mixed", config)
    assert result.resources["nvidia.com/mig-1g.10gb"] == 6
    first = result.devices["nvidia.com/mig-1g.10gb"]
    assert {d.id.split("::")[0] for d in first} == {d.mig_uuid for d in first}
    # Two replicas of one MIG device show one device in the container.
    text = devices.render_smi_list(first[:2])
    assert text.count("MIG 1g.10gb") == 1


# ------------------------------------------------------------------------------ config validation


@pytest.mark.parametrize(
    "text, fragment",
    [
        (TS4.replace("replicas: 4", "replicas: 1"), "number of replicas must be >= 2"),
        (TS4.replace("replicas: 4", "replicas: four"), "expected an integer"),
        (TS4.replace("version: v1", "version: v2"), "unknown version: v2"),
        (TS4.replace("version: v1", ""), "missing version"),
        ("version: v1\nsharing:\n  timeSlicing:\n    resources: []\n", "at least one resource"),
        (TS4 + "  mps:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 2\n", "mutually exclusive"),
        (TS4.replace("nvidia.com/gpu", "amd.com/gpu"), "only nvidia.com/"),
        (TS4.replace("nvidia.com/gpu", "nvidia.com/tpu"), "expected 'gpu' or 'mig-<profile>'"),
        (TS4 + "    - name: gpu\n      replicas: 2\n", "listed twice"),
        ("version: v1\nsharing:\n  mps:\n    resources:\n    - name: mig-1g.10gb\n      replicas: 2\n", "MPS"),
        ("version: v1\nflags:\n  migStrategy: both\n", "unknown MIG strategy"),
        ("version: [v1\n", "unable to parse"),
        ("- a list\n", "expected a mapping"),
    ],
)
def test_invalid_configs_fail_the_plugin(text, fragment):
    with pytest.raises(pluginconfig.PluginConfigError, match=None) as caught:
        pluginconfig.parse_plugin_config(text)
    assert fragment in str(caught.value)
    result = node(host([("H100-80GB", 1)]), "none", text)
    assert result.plugin_error and fragment in result.plugin_error
    assert result.gfd_error == result.plugin_error
    assert result.resources == {} and result.labels == {}


def test_devices_field_is_ignored_with_a_warning():
    text = TS4 + "      devices: [0]\n"
    config = pluginconfig.parse_plugin_config(text)
    assert config.replicas_for("nvidia.com/gpu") == 4
    assert any("devices" in warning for warning in config.warnings)


def test_flags_only_config_means_no_sharing():
    config = pluginconfig.parse_plugin_config("version: v1\nflags:\n  migStrategy: mixed\n")
    assert config.method == "none" and config.flags_mig_strategy == "mixed"


# ------------------------------------------------------------------------------ config selection


CM = {"h100": TS4, "default": TS4_RENAMED}


@pytest.mark.parametrize(
    "name, data, label, default, expected",
    [
        (None, None, "h100", "default", (None, False, False)),
        ("ts", CM, "h100", "default", ("h100", False, False)),
        ("ts", CM, None, "default", ("default", False, False)),
        ("ts", CM, None, None, (None, False, False)),  # operator: no default, not labelled -> nothing
        ("ts", CM, "nope", "default", (None, False, True)),  # unknown label: skipped
        ("ts", None, None, "default", (None, True, False)),  # ConfigMap missing
        ("ts", CM, None, "absent", (None, True, False)),
    ],
)
def test_select_plugin_config(name, data, label, default, expected):
    choice = pluginconfig.select_plugin_config(name, data, label, default)
    assert (choice.name, choice.error is not None, choice.skipped) == expected
    if choice.name:
        assert choice.text == CM[choice.name]


# ------------------------------------------------------------------------------ helpers


def test_render_full_gpu_matches_real_format():
    state = host([("H200", 2)])
    views = devices.gpu_views(state)
    result = devices.compute_node(views, "none")
    second = result.devices["nvidia.com/gpu"][1]
    # Inside the container the GPU is renumbered 0 (it is the only one visible).
    assert devices.render_smi_list([second]) == f"GPU 0: NVIDIA H200 (UUID: {views[1].uuid})\n"
    both = devices.render_smi_list(result.devices["nvidia.com/gpu"])
    assert both.splitlines()[1].startswith("GPU 1: NVIDIA H200 (UUID: GPU-")


def test_render_two_mig_devices_of_one_gpu():
    state = host([("H100-80GB", 1)])
    set_mig(state, 0, ["1g.10gb"] * 3)
    result = node(state, "mixed")
    text = devices.render_smi_list(result.devices["nvidia.com/mig-1g.10gb"][:2])
    lines = text.splitlines()
    assert len(lines) == 3
    assert lines[1].startswith("  MIG 1g.10gb     Device  0: (UUID: MIG-")
    assert lines[2].startswith("  MIG 1g.10gb     Device  1: (UUID: MIG-")


@pytest.mark.parametrize(
    "name, expected",
    [
        ("NVIDIA H100 80GB HBM3", "NVIDIA-H100-80GB-HBM3"),
        ("NVIDIA A100-SXM4-40GB", "NVIDIA-A100-SXM4-40GB"),
        ("Tesla T4", "Tesla-T4"),
        ("NVIDIA H100 (PCIe)", "NVIDIA-H100-PCIe"),
    ],
)
def test_sanitize_product(name, expected):
    assert devices.sanitize_product(name) == expected


def test_resource_names_and_slices():
    assert devices.mig_resource_name("1g.10gb+me") == "nvidia.com/mig-1g.10gb.me"
    assert devices.mig_resource_name("1g.24gb-me") == "nvidia.com/mig-1g.24gb-me"
    assert devices.profile_slices("1c.3g.20gb") == (3, 1)
    assert devices.is_full_compute_profile("3g.20gb")
    assert not devices.is_full_compute_profile("1c.3g.20gb")
    with pytest.raises(ValueError):
        devices.profile_slices("big")


@pytest.mark.parametrize(
    "key, owned",
    [
        ("nvidia.com/gpu.product", True),
        ("nvidia.com/mig-1g.10gb.count", True),
        ("nvidia.com/mig.strategy", True),
        ("nvidia.com/cuda.driver-version.full", True),
        ("nvidia.com/gpu.present", False),
        ("nvidia.com/gpu.deploy.device-plugin", False),
        ("nvidia.com/mig.config", False),
        ("nvidia.com/mig.config.state", False),
        ("nvidia.com/device-plugin.config", False),
        ("nvidia.com/gpu.workload.config", False),
        ("nvidia.com/gpu.engines.copy", True),
        ("nvidia.com/gpu.compute.major", True),
    ],
)
def test_gfd_owned_labels(key, owned):
    assert devices.is_gfd_label(key) is owned


def test_driver_labels_and_views_from_state():
    state = host([("H100-80GB", 1)])
    result = node(state, "none")
    assert result.labels["nvidia.com/cuda.driver-version.full"] == state.driver_version
    assert result.labels["nvidia.com/gpu.compute.major"] == "9"
    views: List[devices.GpuView] = devices.gpu_views(state)
    assert views[0].mig_capable and not views[0].mig_enabled
    assert views[0].mig_profiles["7g.80gb"].multiprocessors == 132


# ------------------------------------------------------------------------------ more reference examples


def _t4_node(count: int) -> List[devices.GpuView]:
    """Tesla T4 is not a lab model: GpuViews built by hand (docs/reference/specs.md §9.3 operator doc example)."""
    return [devices.GpuView(index=i, name="Tesla T4", uuid=f"GPU-t4-{i}", memory_mib=15360, family="turing") for i in range(count)]


def test_spec_t4_example_time_slicing_and_rename():
    shared = devices.compute_node(_t4_node(4), "none", pluginconfig.parse_plugin_config(TS4))
    assert shared.resources == {"nvidia.com/gpu": 16}
    assert shared.labels["nvidia.com/gpu.product"] == "Tesla-T4-SHARED"
    assert shared.labels["nvidia.com/gpu.count"] == "4"
    assert shared.labels["nvidia.com/gpu.replicas"] == "4"
    assert shared.labels["nvidia.com/mig.capable"] == "false"
    renamed = devices.compute_node(_t4_node(4), "none", pluginconfig.parse_plugin_config(TS4_RENAMED))
    assert renamed.resources == {"nvidia.com/gpu.shared": 16}
    assert renamed.labels["nvidia.com/gpu.product"] == "Tesla-T4"


def test_spec_replicas_10_on_8_gpus():
    result = node(host([("A100-80GB", 8)]), "none", TS4.replace("replicas: 4", "replicas: 10"))
    assert result.resources == {"nvidia.com/gpu": 80}  # docs/reference/specs.md §9.3


def test_spec_single_8_a100_all_1g5gb_counts_56():
    state = host([("A100-40GB", 8)])
    for index in range(8):
        set_mig(state, index, ["1g.5gb"] * 7)
    result = node(state, "single")
    assert result.resources == {"nvidia.com/gpu": 56}
    assert result.labels["nvidia.com/gpu.count"] == "56"  # docs/reference/specs.md §8
    assert result.labels["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb"


def test_spec_h100_nvl_mixed_memory_labels():
    state = host([("H100-NVL", 1)])
    set_mig(state, 0, ["1g.12gb", "1g.24gb"])
    result = node(state, "mixed")
    # Real capture (docs/reference/specs.md §8): 1g.12gb -> 11008 MiB, 1g.24gb -> 22144 MiB, product NVIDIA-H100-NVL-MIG-1g.12gb.
    assert result.labels["nvidia.com/mig-1g.12gb.memory"] == "11008"
    assert result.labels["nvidia.com/mig-1g.24gb.memory"] == "22144"
    assert result.labels["nvidia.com/mig-1g.12gb.product"] == "NVIDIA-H100-NVL-MIG-1g.12gb"
