"""Issues 13 and 25: air-gapped installs against the lab (registry mirror, offline image list).

The real helm installs the lab stand-in chart, whose values hold every image where NVIDIA's chart
v26.7.0 does (docs/reference/specs.md §17.1; NFD's in the node-feature-discovery subchart's own
values); the lab's operator renders the operand DaemonSets from the ClusterPolicy's
repository/image/version (the driver's tag + "-<os>" from NFD's node labels), and the chart renders
the operator Deployment and the NFD worker DaemonSet and master/gc Deployments.
"""

from __future__ import annotations

from typing import List

import pytest

# The harness and the fixtures (lab, helm, helm_binary) of the operator module tests.
from test_cluster_modules_operator import CHART, helm, lab, operator_args  # noqa: F401 pylint: disable=unused-import
from gpulab.cluster.operator.nfd import OS_ID_LABEL, OS_VERSION_LABEL, driver_pod_parts, gpu_node_os_tag, read_os_release

MIRROR = "mirror.lab.test:5000"


def rendered_images(lab) -> List[str]:  # noqa: F811
    images = []
    for key in ("apps/v1/daemonsets", "apps/v1/deployments"):
        for obj in lab.store.items(key, "gpu-operator"):
            spec = obj["spec"]["template"]["spec"]
            images += [c["image"] for c in (spec.get("initContainers") or []) + spec["containers"]]
    return sorted(images)


def os_tag() -> str:
    """This machine's OS as NFD labels it and the operator tags the driver (the lab hosts run here)."""
    fields = dict(line.strip().split("=", 1) for line in open("/etc/os-release", encoding="utf-8") if "=" in line)
    os_id, version = fields["ID"].strip('"'), fields["VERSION_ID"].strip('"')
    return os_id + (version.split(".")[0] if os_id in ("rhel", "rocky", "ol") else version)


def test_lab_renders_images_from_the_chart_values(lab, helm):  # noqa: F811
    installed = lab.run("gpu_operator", operator_args(lab, helm), env=helm.environment)
    assert installed["cluster_policy_state"] == "ready", installed
    images = rendered_images(lab)
    assert "nvcr.io/nvidia/gpu-operator:v26.7.0" in images
    assert "nvcr.io/nvidia/k8s-device-plugin:v0.20.0" in images
    assert "registry.k8s.io/nfd/node-feature-discovery:v0.19.0" in images
    assert "nvcr.io/nvidia/k8s/dcgm-exporter:4.6.0-4.8.3-distroless" in images


def test_registry_mirror_rewrites_every_image(lab, helm):  # noqa: F811
    installed = lab.run("gpu_operator", operator_args(lab, helm, registry=MIRROR), env=helm.environment)
    assert installed["cluster_policy_state"] == "ready", installed
    images = rendered_images(lab)
    assert images and all(image.startswith(MIRROR + "/") for image in images), images
    assert not [image for image in images if "nvcr.io" in image]
    assert MIRROR + "/nvidia/k8s/dcgm-exporter:4.6.0-4.8.3-distroless" in images
    assert MIRROR + "/nvidia/gpu-operator:v26.7.0" in images
    assert MIRROR + "/nfd/node-feature-discovery:v0.19.0" in images, images
    again = lab.run("gpu_operator", operator_args(lab, helm, registry=MIRROR), env=helm.environment)
    assert not again["changed"], again


def test_registry_mirror_rewrites_the_driver_and_its_os_tag(lab, helm):  # noqa: F811
    """Issue 25 (1): with the driver on, its DaemonSet pulls driver:<version>-<os> and the driver manager from the mirror."""
    installed = lab.run("gpu_operator", operator_args(lab, helm, registry=MIRROR, driver_enabled=True), env=helm.environment)
    assert installed["cluster_policy_state"] == "ready", installed
    images = rendered_images(lab)
    assert MIRROR + "/nvidia/driver:595.91.07-" + os_tag() in images, images
    assert MIRROR + "/nvidia/cloud-native/k8s-driver-manager:v0.12.0" in images
    assert all(image.startswith(MIRROR + "/") for image in images), images


def test_bad_registry_changes_nothing(lab, helm):  # noqa: F811
    before = lab.rv()
    for bad, word in (("https://mirror.lab.test", "scheme"), ("mirror.lab.test/", "slash")):
        failed = lab.run("gpu_operator", operator_args(lab, helm, registry=bad), env=helm.environment)
        assert failed.get("failed"), failed
        assert bad in failed["msg"] and word in failed["msg"], failed["msg"]
    assert lab.rv() == before
    assert not [c for c in helm.calls() if c[:1] == ["upgrade"]]


VERIFY_IMAGE = "nvcr.io/nvidia/cuda:12.6.3-base-ubuntu24.04"


@pytest.mark.parametrize("driver", [False, True])
def test_offline_image_list_matches_what_the_lab_renders(lab, helm, driver):  # noqa: F811
    """Listed before anything is installed (no cluster, no network: a local chart), then installed
    with the same values: the lab's rendered objects reference exactly the listed chart images
    (NFD's included; with the driver, its tag + the nodes' OS, given as a declared node_os)."""
    before = lab.rv()
    listed = lab.run("gpu_operator_images", {"chart_ref": CHART, "helm_binary": helm.binary, "driver_enabled": driver,
                                             "mig_manager_enabled": False, "extra_images": [VERIFY_IMAGE],
                                             "node_os": [os_tag()], "registry": MIRROR}, env=helm.environment)
    assert not listed.get("failed") and not listed["changed"], listed
    assert lab.rv() == before
    images = [entry["image"] for entry in listed["images"]]
    assert listed["text"].splitlines() == images
    assert VERIFY_IMAGE in images
    assert all(entry["mirror"].startswith(MIRROR + "/") for entry in listed["images"])
    installed = lab.run("gpu_operator", operator_args(lab, helm, driver_enabled=driver), env=helm.environment)
    assert installed["cluster_policy_state"] == "ready", installed
    assert set(images) - {VERIFY_IMAGE} == set(rendered_images(lab))


def test_image_list_refuses_an_os_the_operator_does_not_know(lab, helm):  # noqa: F811
    before = lab.rv()
    for bad, word in (("windows2022", "windows"), ("rhel9.4", "rhel9")):
        failed = lab.run("gpu_operator_images", {"chart_ref": CHART, "helm_binary": helm.binary, "driver_enabled": True,
                                                 "node_os": [bad]}, env=helm.environment)
        assert failed.get("failed") and bad in failed["msg"] and word in failed["msg"], failed
    assert lab.rv() == before


def test_image_list_refuses_a_chart_version_that_does_not_parse(lab, helm):  # noqa: F811
    """Issue 25: a repository chart's --version is a semver range for helm ("26.7" picks a chart silently);
    a version that is not vMAJOR.MINOR.PATCH is refused as such before helm runs (for any chart_ref)."""
    before = lab.rv()
    for bad in ("26.7", "latest", "v26.7.0 --devel"):
        failed = lab.run("gpu_operator_images", {"chart_ref": CHART, "helm_binary": helm.binary, "chart_version": bad,
                                                 "registry": "mirror.lab.test:5000"}, env=helm.environment)
        assert failed.get("failed") and "chart_version" in failed["msg"] and bad in failed["msg"], failed
        assert "does not parse" in failed["msg"], failed
    assert lab.rv() == before


def test_image_list_refuses_a_bad_registry(lab, helm):  # noqa: F811
    failed = lab.run("gpu_operator_images", {"chart_ref": CHART, "helm_binary": helm.binary,
                                             "registry": "http://mirror.lab.test"}, env=helm.environment)
    assert failed.get("failed") and "http://mirror.lab.test" in failed["msg"] and "scheme" in failed["msg"]


def test_proxy_reaches_the_driver_container_env(lab, helm):  # noqa: F811
    proxy = {"http_proxy": "http://proxy.lab.test:3128", "https_proxy": "http://proxy.lab.test:3128",
             "no_proxy": "10.0.0.0/8,.cluster.local"}
    installed = lab.run("gpu_operator", operator_args(lab, helm, proxy=proxy), env=helm.environment)
    assert installed["cluster_policy_state"] == "ready", installed
    env = {e["name"]: e["value"] for e in lab.store.get("nvidia.com/v1/clusterpolicies", None, "cluster-policy")["spec"]["driver"]["env"]}
    assert env == {"HTTP_PROXY": proxy["http_proxy"], "http_proxy": proxy["http_proxy"], "HTTPS_PROXY": proxy["https_proxy"],
                   "https_proxy": proxy["https_proxy"], "NO_PROXY": proxy["no_proxy"], "no_proxy": proxy["no_proxy"]}
    clash = lab.run("gpu_operator", operator_args(lab, helm, proxy=proxy, values={"driver": {"env": [
        {"name": "HTTP_PROXY", "value": "http://other:1"}]}}), env=helm.environment)
    assert clash.get("failed") and "HTTP_PROXY" in clash["msg"], clash


def test_per_pod_metrics_reach_the_exporter_env(lab, helm):  # noqa: F811
    """Issue 13 (5): one typed option; the lab operator passes dcgmExporter.env to the exporter (§17.5)."""
    installed = lab.run("gpu_operator", operator_args(lab, helm, per_pod_metrics=True), env=helm.environment)
    assert installed["cluster_policy_state"] == "ready", installed
    ds = lab.store.get("apps/v1/daemonsets", "gpu-operator", "nvidia-dcgm-exporter")
    env = {e["name"]: e.get("value") for e in ds["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["KUBERNETES_VIRTUAL_GPUS"] == "true" and env["DCGM_EXPORTER_KUBERNETES_ENABLE_POD_LABELS"] == "true"


def test_per_pod_metrics_refused_on_an_exporter_without_them(lab, helm):  # noqa: F811
    before = lab.rv()
    old = {"dcgmExporter": {"version": "4.1.1-4.0.4-ubuntu22.04"}}
    failed = lab.run("gpu_operator", operator_args(lab, helm, per_pod_metrics=True, values=old), env=helm.environment)
    assert failed.get("failed"), failed
    assert "per_pod_metrics" in failed["msg"] and "4.0.4" in failed["msg"] and "4.2.0" in failed["msg"], failed["msg"]
    assert lab.rv() == before


def test_lab_operator_os_tag_follows_nfd_labels(tmp_path):
    """The lab's model of getGPUNodeOSInfo / resolveDriverTag (gpulab.cluster.operator.nfd)."""
    def node(name, os_id=None, version=None, gpu=True):
        labels = {"nvidia.com/gpu.present": "true"} if gpu else {}
        if os_id:
            labels.update({OS_ID_LABEL: os_id, OS_VERSION_LABEL: version})
        return {"metadata": {"name": name, "labels": labels}}

    assert gpu_node_os_tag([node("b", "ubuntu", "24.04"), node("a", "rhel", "9.4"), node("0", gpu=False)]) == ("rhel9", "")
    assert gpu_node_os_tag([node("a", "ubuntu", "22.04")]) == ("ubuntu22.04", "")
    tag, why = gpu_node_os_tag([node("a")])
    assert tag is None and OS_ID_LABEL in why
    assert gpu_node_os_tag([])[0] is None
    spec = {"driver": {"repository": "r/nvidia", "image": "driver", "version": "595.91.07", "imagePullSecrets": ["p"],
                       "manager": {"repository": "r/cn", "image": "k8s-driver-manager", "version": "v0.12.0"}},
            "gds": {"enabled": True, "repository": "r/cn", "image": "nvidia-fs", "version": "2.29.4"},
            "gdrcopy": {"enabled": False, "repository": "r/cn", "image": "gdrdrv", "version": "v2.6"}}
    init, containers, secrets = driver_pod_parts(spec, "ubuntu22.04")
    assert [c["image"] for c in init] == ["r/cn/k8s-driver-manager:v0.12.0"]
    assert [c["image"] for c in containers] == ["r/nvidia/driver:595.91.07-ubuntu22.04", "r/cn/nvidia-fs:2.29.4-ubuntu22.04"]
    assert secrets == ["p"]
    spec["driver"]["version"] = "sha256:" + "b" * 64
    assert driver_pod_parts(spec, "ubuntu22.04")[1][0]["image"] == "r/nvidia/driver@sha256:" + "b" * 64
    release = tmp_path / "os-release"
    release.write_text('NAME="Rocky Linux"\nID="rocky"\nVERSION_ID="9.5"\n', encoding="utf-8")
    assert read_os_release(str(release)) == ("rocky", "9.5")
    assert read_os_release(str(tmp_path / "missing")) == ("", "")
