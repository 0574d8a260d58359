"""_images: image-holding values found in the chart's values, mirror rewrite, image list (issue 13)."""

from __future__ import annotations

import base64
import json

import pytest

from ansible_collections.gpufleet.sharing.plugins.module_utils.operator._images import (
    REPO_TAG, TRIPLE, ImageError, chart_images, docker_config_secret, image_slots, mirror_image, mirror_values,
    per_pod_metrics_env, proxy_env, pull_secret_values, registry_host, registry_problems)
from ansible_collections.gpufleet.sharing.plugins.module_utils.proof._verify import PodSpecWanted, pod_manifest

CHART = {
    "operator": {"repository": "nvcr.io/nvidia", "image": "gpu-operator", "tolerations": []},
    "validator": {"repository": "nvcr.io/nvidia/cloud-native", "image": "gpu-operator-validator"},
    "driver": {"enabled": True, "repository": "nvcr.io/nvidia", "image": "driver", "version": "595.91.07"},
    "dcgmExporter": {"enabled": True, "repository": "nvcr.io/nvidia/k8s", "image": "dcgm-exporter", "version": "4.6.0"},
    "newOperand": {"enabled": True, "repository": "nvcr.io/nvidia/cloud-native", "image": "new", "version": "v1"},
    "nfd": {"enabled": True},
    "node-feature-discovery": {"image": {"repository": "registry.k8s.io/nfd/node-feature-discovery", "tag": "v0.18.2"}},
}


def test_slots_come_from_the_chart_values():
    slots = {slot.dotted: slot.style for slot in image_slots(CHART)}
    assert slots == {"operator": TRIPLE, "validator": TRIPLE, "driver": TRIPLE, "dcgmExporter": TRIPLE,
                     "newOperand": TRIPLE, "node-feature-discovery.image": REPO_TAG}


def test_mirror_keeps_path_name_and_tag_and_follows_user_repositories():
    overrides = mirror_values(CHART, {"driver": {"repository": "quay.io/custom"}}, "mirror.example:5000/gpu")
    assert overrides["dcgmExporter"] == {"repository": "mirror.example:5000/gpu/nvidia/k8s"}
    assert overrides["driver"] == {"repository": "mirror.example:5000/gpu/custom"}
    assert overrides["newOperand"]["repository"] == "mirror.example:5000/gpu/nvidia/cloud-native"
    assert overrides["node-feature-discovery"]["image"]["repository"] == "mirror.example:5000/gpu/nfd/node-feature-discovery"


def test_image_list_leaves_out_disabled_sections_and_adds_ours():
    images = chart_images(CHART, {"driver": {"enabled": False}, "nfd": {"enabled": False}}, "v26.7.0",
                          extra=["nvcr.io/nvidia/cuda:12.6.3-base-ubuntu24.04"])
    assert [entry["image"] for entry in images] == [
        "nvcr.io/nvidia/cloud-native/gpu-operator-validator:v26.7.0", "nvcr.io/nvidia/cloud-native/new:v1",
        "nvcr.io/nvidia/cuda:12.6.3-base-ubuntu24.04", "nvcr.io/nvidia/gpu-operator:v26.7.0",
        "nvcr.io/nvidia/k8s/dcgm-exporter:4.6.0"]


@pytest.mark.parametrize("bad,word", [("https://mirror.example", "scheme"), ("mirror.example/", "slash"),
                                      ("mirror example", "host[:port][/path]"), ("mirror.example/Upper", "lower-case")])
def test_bad_registry_is_named(bad, word):
    problems = registry_problems(bad)
    assert problems and bad in problems[0] and word in problems[0]
    with pytest.raises(ImageError):
        mirror_values(CHART, {}, bad)


def test_mirror_image():
    assert mirror_image("nvcr.io/nvidia/cuda:12.6.3", "m.example") == "m.example/nvidia/cuda:12.6.3"
    assert mirror_image("busybox:1.36", "m.example") == "m.example/busybox:1.36"
    assert mirror_image("nvcr.io/nvidia/cuda:12.6.3", "") == "nvcr.io/nvidia/cuda:12.6.3"


def test_pull_secrets_go_to_every_image_pull_secrets_value_of_the_chart():
    chart = {"operator": {"imagePullSecrets": []}, "driver": {"imagePullSecrets": [], "manager": {"image": "m"}},
             "node-feature-discovery": {"imagePullSecrets": []}, "mig": {"strategy": "single"}}
    assert pull_secret_values(chart, ["mirror"]) == {"operator": {"imagePullSecrets": ["mirror"]},
                                                     "driver": {"imagePullSecrets": ["mirror"]},
                                                     "node-feature-discovery": {"imagePullSecrets": ["mirror"]}}


def test_docker_config_secret():
    secret = docker_config_secret("creds", "gpu-operator", "mirror.example:5000", "robot", "pw")
    assert secret["type"] == "kubernetes.io/dockerconfigjson"
    config = json.loads(base64.b64decode(secret["data"][".dockerconfigjson"]))
    assert config["auths"]["mirror.example:5000"]["auth"] == base64.b64encode(b"robot:pw").decode()
    assert registry_host("mirror.example:5000/gpu") == "mirror.example:5000"


def test_verification_pod_names_its_pull_secrets():
    wanted = PodSpecWanted("gpu-a", "nvidia.com/gpu", "gpu")
    pod = pod_manifest(wanted, "p", "ns", "run1", "m.example/nvidia/cuda:12", ["nvidia-smi"], image_pull_secrets=["mirror"])
    assert pod["spec"]["imagePullSecrets"] == [{"name": "mirror"}]
    assert "imagePullSecrets" not in pod_manifest(wanted, "p", "ns", "run1", "i", ["x"])["spec"]


def test_proxy_env_adds_both_spellings_after_user_entries_and_names_a_clash():
    values = {"driver": {"env": [{"name": "FOO", "value": "1"}, {"name": "no_proxy", "value": ".local"}]}}
    env = proxy_env(values, {"http_proxy": "http://p:3128", "no_proxy": ".local", "https_proxy": ""})
    assert env == [{"name": "FOO", "value": "1"}, {"name": "no_proxy", "value": ".local"},
                   {"name": "HTTP_PROXY", "value": "http://p:3128"}, {"name": "http_proxy", "value": "http://p:3128"},
                   {"name": "NO_PROXY", "value": ".local"}]
    with pytest.raises(ImageError, match="proxy.no_proxy='.x' contradicts values.driver.env no_proxy='.local'"):
        proxy_env(values, {"no_proxy": ".x"})


def test_per_pod_metrics_needs_exporter_4_2_and_sets_both_settings():
    chart = {"dcgmExporter": {"version": "4.6.0-4.8.3-distroless"}}
    assert per_pod_metrics_env(chart, {}) == [{"name": "KUBERNETES_VIRTUAL_GPUS", "value": "true"},
                                              {"name": "DCGM_EXPORTER_KUBERNETES_ENABLE_POD_LABELS", "value": "true"}]
    with pytest.raises(ImageError, match=r"DCGM exporter 4\.0\.4 \(tag 4\.1\.1-4\.0\.4\) lacks"):
        per_pod_metrics_env(chart, {"dcgmExporter": {"version": "4.1.1-4.0.4"}})
    with pytest.raises(ImageError, match="does not say its release"):
        per_pod_metrics_env({"dcgmExporter": {"version": "sha256:abc"}}, {})
    with pytest.raises(ImageError, match="per_pod_metrics='true' contradicts values.dcgmExporter.env KUBERNETES_VIRTUAL_GPUS='false'"):
        per_pod_metrics_env(chart, {"dcgmExporter": {"env": [{"name": "KUBERNETES_VIRTUAL_GPUS", "value": "false"}]}})
