"""The lab's DCGM exporter (issue 13 part 5): its /metrics, reached through the API server's pod proxy
as on a real cluster, is derived from the node's GPU state and the pods bound to it; pod attribution
of shared devices follows KUBERNETES_VIRTUAL_GPUS (docs/reference/specs.md §17.5, §17.6)."""

from __future__ import annotations

import pytest
from kubernetes import client, config
from kubernetes.client.rest import ApiException

from gpulab.cluster import devices as devmod
from gpulab.cluster import exporter
from gpulab.cluster.containers import ALLOCATED_ANNOTATION, RUNTIME_ANNOTATION
from labtools import wait_until
from test_cluster_modules_sharing import install_operator, start_lab

GPU = devmod.GpuView(index=0, name="NVIDIA H100 80GB HBM3", uuid="GPU-aaaa", memory_mib=81559)
MIG = devmod.MigDeviceView(profile="3g.40gb", gi_profile="3g.40gb", gi_id=2, ci_id=0, uuid="MIG-bbbb")
MIG_GPU = devmod.GpuView(index=1, name="NVIDIA H100 80GB HBM3", uuid="GPU-cccc", memory_mib=81559, mig_capable=True,
                         mig_enabled=True, mig_devices=(MIG,))


def running(name, annotation):
    return {"metadata": {"namespace": "v", "name": name, "annotations": {ALLOCATED_ANNOTATION: annotation}},
            "status": {"phase": "Running"}}


def series(text, metric="DCGM_FI_DEV_GPU_UTIL"):
    return [line for line in text.splitlines() if line.startswith(metric + "{")]


def test_replicas_attributed_only_with_virtual_gpus():
    held = exporter.holders([running("a", "c=GPU-aaaa::0"), running("b", "c=GPU-aaaa::1"), running("m", "c=MIG-bbbb")])
    plain = series(exporter.render([GPU, MIG_GPU], held, {}, "node-1"))
    assert len(plain) == 2 and "pod=" not in plain[0] and 'pod="m"' in plain[1] and 'GPU_I_PROFILE="3g.40gb"' in plain[1]
    virtual = series(exporter.render([GPU, MIG_GPU], held, {"KUBERNETES_VIRTUAL_GPUS": "true"}, "node-1"))
    assert [('pod="a"' in s, 'pod="b"' in s) for s in virtual[:2]] == [(True, False), (False, True)]
    assert 'vgpu="1"' in virtual[1] and 'Hostname="node-1"' in virtual[1]
    assert all("pod=" not in s for s in series(exporter.render([GPU], held, {"DCGM_EXPORTER_KUBERNETES": "false"}, "n")))


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    running_lab = start_lab(str(tmp_path_factory.mktemp("dcgm")), [("gpu-1", "H100-80GB", 1)])
    try:
        install_operator(running_lab)
        yield running_lab
    finally:
        running_lab.stop()


def test_exporter_metrics_through_the_pod_proxy(lab):
    core = client.CoreV1Api(config.new_client_from_config(config_file=lab.kubeconfig))
    wait_until("gpu advertised", lambda: (lab.store.get("v1/nodes", None, "gpu-1").get("status") or {})
               .get("allocatable", {}).get("nvidia.com/gpu") == "1", timeout=60)
    core.create_namespace({"metadata": {"name": "v"}})
    core.create_namespaced_pod("v", {"metadata": {"name": "holder", "annotations": {RUNTIME_ANNOTATION: "60"}},
                                     "spec": {"restartPolicy": "Never", "containers": [{
                                         "name": "c", "image": "cuda", "command": ["nvidia-smi", "-L"],
                                         "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}})
    wait_until("holder running", lambda: lab.store.get("v1/pods", "v", "holder").get("status", {}).get("phase") == "Running",
               timeout=60)
    pods = [p for p in lab.store.items("v1/pods", "gpu-operator") if "dcgm-exporter" in p["metadata"]["name"]]
    assert pods, "no exporter pod"
    wait_until("exporter running", lambda: lab.store.get("v1/pods", "gpu-operator", pods[0]["metadata"]["name"])
               .get("status", {}).get("phase") == "Running", timeout=60)
    text = core.connect_get_namespaced_pod_proxy_with_path(pods[0]["metadata"]["name"] + ":9400", "gpu-operator", "metrics")
    lines = series(text)
    assert len(lines) == 1 and 'pod="holder"' in lines[0] and 'namespace="v"' in lines[0] and 'container="c"' in lines[0]
    with pytest.raises(ApiException) as refused:
        core.connect_get_namespaced_pod_proxy_with_path("holder:9400", "v", "metrics")
    assert refused.value.status == 503
