"""_image_plan and the image list / pull secrets built on it (issue 25 (1)).

The chart below is written for these tests with the structure of NVIDIA's gpu-operator chart v26.7.0
(deployments/gpu-operator/values.yaml and its node-feature-discovery subchart's values.yaml): which
sections exist, which have an imagePullSecrets key, which are enabled by default. Not a copy.
"""

from __future__ import annotations

import itertools

import pytest

from ansible_collections.gpufleet.sharing.plugins.module_utils.operator._image_plan import (
    KNOWN_OS, OsError, fleet_os_tags, os_tag, parse_os_tag, pulled)
from ansible_collections.gpufleet.sharing.plugins.module_utils.operator._images import (
    ImageError, chart_images, full_chart_values, merge, mirror_values, pull_secret_values, with_subcharts)


def triple(repository, image, version=None, secrets=True, **extra):
    section = {"repository": repository, "image": image}
    if version is not None:
        section["version"] = version
    if secrets:
        section["imagePullSecrets"] = []
    section.update(extra)
    return section


PARENT = {
    "nfd": {"enabled": True},
    "sandboxWorkloads": {"enabled": False, "mode": "kubevirt"},
    "operator": triple("nvcr.io/nvidia", "gpu-operator"),
    "validator": triple("nvcr.io/nvidia", "gpu-operator"),
    "driver": triple("nvcr.io/nvidia", "driver", "595.91.07", enabled=True,
                     manager={"repository": "nvcr.io/nvidia/cloud-native", "image": "k8s-driver-manager", "version": "v0.12.0"}),
    "toolkit": triple("nvcr.io/nvidia/k8s", "container-toolkit", "v1.20.0", enabled=True),
    "devicePlugin": triple("nvcr.io/nvidia", "k8s-device-plugin", "v0.20.0", enabled=True),
    "dcgm": triple("nvcr.io/nvidia/cloud-native", "dcgm", "4.6.0-1-ubuntu24.04", secrets=False, enabled=False),
    "dcgmExporter": triple("nvcr.io/nvidia/k8s", "dcgm-exporter", "4.6.0-4.8.3-distroless", secrets=False, enabled=True),
    "gfd": triple("nvcr.io/nvidia", "k8s-device-plugin", "v0.20.0", enabled=True),
    "migManager": triple("nvcr.io/nvidia/cloud-native", "k8s-mig-manager", "v0.15.0", enabled=True),
    "nodeStatusExporter": triple("nvcr.io/nvidia", "gpu-operator", enabled=False),
    "gds": triple("nvcr.io/nvidia/cloud-native", "nvidia-fs", "2.29.4", enabled=False),
    "gdrcopy": triple("nvcr.io/nvidia/cloud-native", "gdrdrv", "v2.6", enabled=False),
    "vgpuManager": triple("", "vgpu-manager", "", enabled=False),
    "vgpuDeviceManager": triple("nvcr.io/nvidia/cloud-native", "vgpu-device-manager", "v0.5.0", enabled=True),
    "vfioManager": triple("nvcr.io/nvidia/cloud-native", "k8s-driver-manager", "v0.12.0", enabled=True),
    "kataManager": {"enabled": False, "imagePullSecrets": []},
    "sandboxDevicePlugin": triple("nvcr.io/nvidia", "kubevirt-gpu-device-plugin", "v1.6.0", enabled=True),
    "kataSandboxDevicePlugin": triple("nvcr.io/nvidia/cloud-native", "nvidia-sandbox-device-plugin", "v0.0.5", enabled=True),
    "ccManager": triple("nvcr.io/nvidia/cloud-native", "k8s-cc-manager", "v0.4.3", enabled=True),
    "clusterPolicy": {"deployCR": True},
    "gpuCluster": {"deployCR": False},
    "draDriver": triple("nvcr.io/nvidia", "dra-driver-nvidia-gpu", "v0.5.0"),
    "node-feature-discovery": {"worker": {"tolerations": []}},
}
NFD = {"image": {"repository": "registry.k8s.io/nfd/node-feature-discovery", "tag": None},
       "imagePullSecrets": [], "global": {"imagePullSecrets": []}, "worker": {"enable": True}}
CHART = with_subcharts(PARENT, {"node-feature-discovery": (NFD, "v0.19.0")})
NFD_IMAGE = "registry.k8s.io/nfd/node-feature-discovery:v0.19.0"
APP = "v26.7.0"


def images(values, tags=("ubuntu22.04",), chart=None):
    return {entry["image"] for entry in chart_images(chart or CHART, values, APP, os_tags=tags)}


# --- OS tags -------------------------------------------------------------------------------------

@pytest.mark.parametrize("os_id,version,tag", [
    ("Ubuntu", "22.04", "ubuntu22.04"), ("ubuntu", "24.04", "ubuntu24.04"), ("RedHat", "9.4", "rhel9"),
    ("rhel", "8.10", "rhel8"), ("Rocky", "9.5", "rocky9"), ("OracleLinux", "8.9", "ol8"), ("rhcos", "4.16", "rhcos4.16"),
    ("Debian", "12", "debian12"), ("Debian", "12.7", "debian12"), ("CentOS", "7.9.2009", "centos7"),
    ("SLES", "15.6", "sles15.6"), ("sl-micro", "6.0", "sl-micro6.0"), ("CentOS", "7", "centos7")])
def test_os_tag_follows_the_operator(os_id, version, tag):
    assert os_tag(os_id, version) == tag
    assert parse_os_tag(tag) == tag


@pytest.mark.parametrize("os_id,version,word", [("Windows", "2022", "windows"), ("Fedora", "40", "fedora"),
                                                ("ubuntu", "", "version"), ("ubuntu", "jammy", "jammy")])
def test_unknown_os_is_named(os_id, version, word):
    with pytest.raises(OsError) as err:
        os_tag(os_id, version, "host gpu-a")
    assert "host gpu-a" in str(err.value) and word in str(err.value).lower()


@pytest.mark.parametrize("tag,word", [("rhel9.4", "rhel9"), ("rocky9.5", "rocky9"), ("debian12.7", "debian12"),
                                      ("windows2022", "windows"),
                                      ("ubuntu", "OS tag"), ("Ubuntu22.04", "OS tag"), ("ubuntu-22.04", "OS tag"), ("", "OS tag")])
def test_declared_tag_must_be_one_the_operator_makes(tag, word):
    with pytest.raises(OsError) as err:
        parse_os_tag(tag, "node_os[0]")
    assert "node_os[0]" in str(err.value) and word in str(err.value)


def test_fleet_tags_declared_first_then_facts_and_every_problem_listed():
    facts = [{"host": "a", "distribution": "Ubuntu", "version": "22.04"}, {"host": "b", "distribution": "RedHat", "version": "9.4"},
             {"host": "c", "distribution": "Ubuntu", "version": "22.04"}]
    assert fleet_os_tags([], facts) == ["rhel9", "ubuntu22.04"]
    assert fleet_os_tags(["ubuntu24.04"], facts) == ["ubuntu24.04"]
    assert fleet_os_tags([], []) == []
    with pytest.raises(OsError) as err:
        fleet_os_tags([], facts + [{"host": "d", "distribution": "Windows", "version": "2022"},
                                   {"host": "e", "distribution": "Gentoo", "version": "2"}])
    assert len(err.value.problems) == 2 and "host d" in str(err.value) and "host e" in str(err.value)
    with pytest.raises(OsError):
        fleet_os_tags(["ubuntu22.04", "rhel9.4"], [])


# --- what is pulled ------------------------------------------------------------------------------

BASE = {"nvcr.io/nvidia/gpu-operator:v26.7.0", "nvcr.io/nvidia/k8s/container-toolkit:v1.20.0",
        "nvcr.io/nvidia/k8s-device-plugin:v0.20.0", "nvcr.io/nvidia/k8s/dcgm-exporter:4.6.0-4.8.3-distroless",
        "nvcr.io/nvidia/cloud-native/k8s-mig-manager:v0.15.0", NFD_IMAGE}
DRIVER = {"nvcr.io/nvidia/driver:595.91.07-ubuntu22.04", "nvcr.io/nvidia/cloud-native/k8s-driver-manager:v0.12.0"}


def test_defaults_pull_nfd_and_the_driver_with_its_os_but_no_sandbox_component():
    assert images({}) == BASE | DRIVER


def test_driver_off_drops_driver_manager_gds_and_gdrcopy():
    assert images({"driver": {"enabled": False}, "gds": {"enabled": True}, "gdrcopy": {"enabled": True}}) == BASE


def test_one_driver_image_per_node_os_with_gds_and_gdrcopy():
    got = images({"gds": {"enabled": True}, "gdrcopy": {"enabled": True}}, tags=("rhel9", "ubuntu22.04"))
    for name in ("driver:595.91.07", "cloud-native/nvidia-fs:2.29.4", "cloud-native/gdrdrv:v2.6"):
        assert {"nvcr.io/nvidia/%s-rhel9" % name, "nvcr.io/nvidia/%s-ubuntu22.04" % name} <= got, name
    assert not [image for image in got if image.endswith(":595.91.07") or image.endswith(":2.29.4")]


def test_digest_gets_no_os_suffix():
    got = images({"driver": {"version": "sha256:" + "a" * 64}}, tags=())
    assert "nvcr.io/nvidia/driver@sha256:" + "a" * 64 in got


def test_driver_type_image_without_os_is_refused():
    with pytest.raises(ImageError) as err:
        chart_images(CHART, {}, APP)
    assert "driver" in str(err.value) and "node_os" in str(err.value)
    assert images({"driver": {"enabled": False}}, tags=()) == BASE


def test_precompiled_driver_is_refused_rather_than_listed_wrong():
    with pytest.raises(ImageError) as err:
        chart_images(CHART, {"driver": {"usePrecompiled": True}}, APP, os_tags=["ubuntu22.04"])
    assert "usePrecompiled" in str(err.value) and "kernel" in str(err.value)


def test_nfd_follows_nfd_enabled_and_its_own_tag():
    assert NFD_IMAGE not in images({"nfd": {"enabled": False}})
    assert "registry.k8s.io/nfd/node-feature-discovery:v0.18.2" in images({"node-feature-discovery": {"image": {"tag": "v0.18.2"}}})


@pytest.mark.parametrize("mode,expected", [
    ("kubevirt", {"nvcr.io/nvidia/kubevirt-gpu-device-plugin:v1.6.0"}),
    ("kata", {"nvcr.io/nvidia/cloud-native/nvidia-sandbox-device-plugin:v0.0.5", "nvcr.io/nvidia/cloud-native/k8s-cc-manager:v0.4.3"})])
def test_sandbox_components_only_with_sandbox_workloads_and_their_mode(mode, expected):
    common = {"nvcr.io/nvidia/cloud-native/vgpu-device-manager:v0.5.0", "nvcr.io/nvidia/cloud-native/k8s-driver-manager:v0.12.0"}
    got = images({"sandboxWorkloads": {"enabled": True, "mode": mode}})
    assert got == BASE | DRIVER | common | expected


def test_dra_driver_only_with_its_cr_and_nothing_of_the_policy_without_it():
    assert "nvcr.io/nvidia/dra-driver-nvidia-gpu:v0.5.0" not in images({})
    got = images({"gpuCluster": {"deployCR": True}, "clusterPolicy": {"deployCR": False}}, tags=())
    assert got == {"nvcr.io/nvidia/gpu-operator:v26.7.0", NFD_IMAGE, "nvcr.io/nvidia/dra-driver-nvidia-gpu:v0.5.0"}


def test_optional_components_when_enabled():
    got = images({"dcgm": {"enabled": True}, "nodeStatusExporter": {"enabled": True}})
    assert "nvcr.io/nvidia/cloud-native/dcgm:4.6.0-1-ubuntu24.04" in got


def test_kata_manager_is_never_deployed():
    assert pulled(merge(CHART, {"kataManager": {"enabled": True}}), ("kataManager",)) is False


@pytest.mark.parametrize("flags", list(itertools.product([True, False], repeat=4)))
def test_every_enabled_switch_combination_lists_exactly_the_enabled_ones(flags):
    keys = ("devicePlugin", "gfd", "dcgmExporter", "migManager")
    values = {key: {"enabled": flag} for key, flag in zip(keys, flags)}
    values["driver"] = {"enabled": False}
    got = images(values, tags=())
    for key, flag in zip(keys, flags):
        section = CHART[key]
        image = "%s/%s:%s" % (section["repository"], section["image"], section["version"])
        others = [k for k, f in zip(keys, flags) if f and CHART[k]["image"] == section["image"]]
        assert (image in got) == (flag or bool(others)), key


# --- subcharts, mirror, pull secrets ------------------------------------------------------------

def test_subchart_values_come_under_their_name_with_the_parents_overrides():
    merged = full_chart_values("nfd: {enabled: true}\nnode-feature-discovery:\n  worker: {tolerations: [{key: a}]}\n",
                               {"node-feature-discovery": ("image: {repository: r/nfd, tag: ''}\nimagePullSecrets: []\n"
                                                           "worker: {enable: true, tolerations: []}\n", "v0.19.0")})
    assert merged["node-feature-discovery"]["image"] == {"repository": "r/nfd", "tag": "v0.19.0"}
    assert merged["node-feature-discovery"]["worker"] == {"enable": True, "tolerations": [{"key": "a"}]}


def test_mirror_covers_nfd():
    overrides = mirror_values(CHART, {}, "mirror.example:5000")
    assert overrides["node-feature-discovery"]["image"]["repository"] == "mirror.example:5000/nfd/node-feature-discovery"


def test_pull_secrets_reach_every_section_that_pulls_and_nfd_as_references():
    overrides = pull_secret_values(CHART, ["mirror-pull"], subcharts=["node-feature-discovery"])
    for key in ("operator", "validator", "driver", "toolkit", "devicePlugin", "dcgm", "dcgmExporter", "gfd", "migManager",
                "nodeStatusExporter", "gds", "gdrcopy", "vgpuDeviceManager", "vfioManager", "sandboxDevicePlugin",
                "kataSandboxDevicePlugin", "ccManager", "draDriver", "kataManager"):
        assert overrides[key]["imagePullSecrets"] == ["mirror-pull"], key
    assert overrides["node-feature-discovery"] == {"imagePullSecrets": [{"name": "mirror-pull"}]}
    assert "manager" not in overrides["driver"] and "nfd" not in overrides


def test_known_os_list_is_the_operators():
    assert KNOWN_OS == ("centos", "debian", "ubuntu", "rhcos", "rhel", "rocky", "ol", "sles", "sl-micro")
