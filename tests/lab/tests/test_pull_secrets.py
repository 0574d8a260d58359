"""Issue 13 (3): image pull secrets against a lab whose mirror registry needs credentials.

The lab's kubelet refuses pulls from the hosts in GPULAB_PRIVATE_REGISTRIES unless one of the pod's
imagePullSecrets has credentials for the host (docs/reference/specs.md §17.2); the lab operator
copies each operand section's imagePullSecrets into its DaemonSet, as NVIDIA's operator does.
"""

from __future__ import annotations

import base64
import json

import pytest

from labtools import environ
# The harness and the fixtures (helm, helm_binary) of the operator module tests.
from test_cluster_modules_operator import Lab, helm, operator_args  # noqa: F401 pylint: disable=unused-import

MIRROR = "mirror.lab.test:5000"
PLANTED = "s3cr3t-Planted-Pa55word-0x5eed"


@pytest.fixture
def lab(tmp_path):
    with environ({"GPULAB_PRIVATE_REGISTRIES": MIRROR}):
        running = Lab(tmp_path, [("gpu-a", "A100-40GB", 1)])
    yield running
    running.stop()


def docker_secret(name: str, host: str = MIRROR) -> dict:
    config = {"auths": {host: {"username": "lab", "password": "lab", "auth": base64.b64encode(b"lab:lab").decode()}}}
    return {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/dockerconfigjson",
            "metadata": {"name": name, "namespace": "gpu-operator"},
            "data": {".dockerconfigjson": base64.b64encode(json.dumps(config).encode()).decode()}}


def pod_waiting_reasons(lab) -> set:
    reasons = set()
    for pod in lab.store.items("v1/pods", "gpu-operator"):
        for status in (pod.get("status") or {}).get("containerStatuses") or []:
            reasons.add(((status.get("state") or {}).get("waiting") or {}).get("reason"))
    return reasons


def test_private_mirror_without_credentials_never_gets_ready(lab, helm):  # noqa: F811
    failed = lab.run("gpu_operator", operator_args(lab, helm, registry=MIRROR, wait_timeout=4), env=helm.environment)
    assert failed.get("failed") and "ErrImagePull" in json.dumps(failed["diagnosis"]), failed
    assert "ErrImagePull" in pod_waiting_reasons(lab)


def test_pull_secret_by_name_reaches_every_operand(lab, helm):  # noqa: F811
    lab.k8s.ensure_namespace("gpu-operator")
    lab.k8s.create(docker_secret("mirror-pull"))
    installed = lab.run("gpu_operator", operator_args(lab, helm, registry=MIRROR, image_pull_secrets=["mirror-pull"]),
                        env=helm.environment)
    assert installed.get("cluster_policy_state") == "ready", installed
    workloads = lab.store.items("apps/v1/daemonsets", "gpu-operator") + lab.store.items("apps/v1/deployments", "gpu-operator")
    names = {obj["metadata"]["name"] for obj in workloads}
    # issue 25 (1): dcgm-exporter and the NFD workloads too, though the chart's defaults have no key for them
    assert {"nvidia-dcgm-exporter", "gpu-operator-node-feature-discovery-worker", "gpu-operator-node-feature-discovery-master",
            "gpu-operator-node-feature-discovery-gc", "gpu-operator"} <= names, names
    for obj in workloads:
        assert obj["spec"]["template"]["spec"]["imagePullSecrets"] == [{"name": "mirror-pull"}], obj["metadata"]["name"]
    for pod in lab.store.items("v1/pods", "gpu-operator"):
        assert pod["spec"].get("imagePullSecrets") == [{"name": "mirror-pull"}], pod["metadata"]["name"]
    assert "ErrImagePull" not in pod_waiting_reasons(lab)


def test_pull_secret_reaches_dcgm_and_the_driver_when_enabled(lab, helm):  # noqa: F811
    """Issue 25 (1): the standalone DCGM (no imagePullSecrets key in the chart's values) and the driver."""
    lab.k8s.ensure_namespace("gpu-operator")
    lab.k8s.create(docker_secret("mirror-pull"))
    installed = lab.run("gpu_operator", operator_args(lab, helm, registry=MIRROR, image_pull_secrets=["mirror-pull"],
                                                      driver_enabled=True, values={"dcgm": {"enabled": True}}),
                        env=helm.environment)
    assert installed.get("cluster_policy_state") == "ready", installed
    for name in ("nvidia-dcgm", "nvidia-driver-daemonset"):
        ds = lab.store.get("apps/v1/daemonsets", "gpu-operator", name)
        assert ds["spec"]["template"]["spec"]["imagePullSecrets"] == [{"name": "mirror-pull"}], name


def test_nonexistent_pull_secret_is_refused_and_changes_nothing(lab, helm):  # noqa: F811
    before = lab.rv()
    failed = lab.run("gpu_operator", operator_args(lab, helm, registry=MIRROR, image_pull_secrets=["no-such-secret"]),
                     env=helm.environment)
    assert failed.get("failed") and "no-such-secret" in failed["msg"] and "gpu-operator" in failed["msg"], failed
    assert lab.rv() == before
    assert not [c for c in helm.calls() if c[:1] == ["upgrade"]]


def test_credentials_make_a_secret_and_never_show_the_password(lab, helm, tmp_path):  # noqa: F811
    credentials = {"name": "mirror-creds", "username": "robot", "password": PLANTED}
    args = operator_args(lab, helm, registry=MIRROR, registry_credentials=credentials)
    installed = lab.run("gpu_operator", args, diff=True, env=helm.environment)
    assert installed.get("cluster_policy_state") == "ready", installed
    secret = lab.store.get("v1/secrets", "gpu-operator", "mirror-creds")
    assert secret["type"] == "kubernetes.io/dockerconfigjson"
    auths = json.loads(base64.b64decode(secret["data"][".dockerconfigjson"]))["auths"]
    assert auths[MIRROR]["password"] == PLANTED
    again = lab.run("gpu_operator", args, diff=True, env=helm.environment)
    assert not again["changed"], again
    seen = [json.dumps(installed), json.dumps(again), json.dumps(helm.calls())]
    seen += [path.read_text(errors="replace") for path in tmp_path.rglob("*") if path.is_file() and path.stat().st_size < 10 ** 6
             and "lab" not in path.parts]
    assert not [text for text in seen if PLANTED in text]
    assert not [text for text in seen if base64.b64encode(PLANTED.encode()).decode() in text]
