"""The DCGM exporter's ``/metrics`` endpoint in the lab, reached through the API server's pod proxy
(``GET /api/v1/namespaces/NS/pods/NAME:9400/proxy/metrics``).

Derived from the node's GPU state file and the pods bound to the node (their
``lab.gpufleet.io/allocated-devices``), as docs/reference/specs.md §17.5 and §17.6 describe the real
exporter: one series per GPU, or per MIG device on a MIG-enabled GPU (``GPU_I_PROFILE``, ``GPU_I_ID``), with
``gpu``, ``UUID``, ``device``, ``modelName`` and ``Hostname``. With Kubernetes mapping (on unless the
container's ``DCGM_EXPORTER_KUBERNETES`` is ``false``) a device's series carries the ``pod``, ``namespace``
and ``container`` that hold it. A replica of a shared device (time-slicing or MPS, device id ``<uuid>::<n>``)
matches no device and is attributed to no pod, unless ``KUBERNETES_VIRTUAL_GPUS=true``: then the series is
repeated per pod holding a replica, with ``vgpu`` naming it (§17.6).
Values are fixed lab figures (utilisation 0, memory used 0).
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple

from gpulab import gpustate
from gpulab.cluster import devices as devmod
from gpulab.cluster.containers import ALLOCATED_ANNOTATION
from gpulab.cluster.errors import ApiError
from gpulab.cluster.objects import Obj

EXPORTER_PORT = 9400
STATE_ANNOTATION = "gpulab.io/state-file"
METRICS = (("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %)."),
           ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB)."))
Holder = Tuple[str, str, str, str]  # namespace, pod, container, replica ("" = the whole device)


def exporter_container(pod: Mapping[str, Any]) -> Optional[Mapping[str, Any]]:
    for container in (pod.get("spec") or {}).get("containers") or []:
        if "dcgm-exporter" in str(container.get("image") or ""):
            return container
    return None


def container_env(container: Mapping[str, Any]) -> Dict[str, str]:
    return {str(e.get("name")): str(e.get("value") or "") for e in container.get("env") or [] if isinstance(e, dict)}


def holders(pods: Iterable[Mapping[str, Any]]) -> Dict[str, List[Holder]]:
    """Physical device id (GPU or MIG UUID) -> the running containers that hold it or one of its replicas."""
    found: Dict[str, List[Holder]] = {}
    for pod in pods:
        meta = pod.get("metadata") or {}
        if (pod.get("status") or {}).get("phase") != "Running":
            continue
        for entry in str((meta.get("annotations") or {}).get(ALLOCATED_ANNOTATION) or "").split(";"):
            container, _sep, ids = entry.partition("=")
            for device_id in filter(None, ids.split(",")):
                physical, _sep, replica = device_id.partition(devmod.REPLICA_SEPARATOR)
                found.setdefault(physical, []).append((meta.get("namespace", ""), meta.get("name", ""), container, replica))
    return {key: sorted(value) for key, value in found.items()}


def _label_text(labels: Mapping[str, str]) -> str:
    return ",".join('%s="%s"' % (key, value.replace("\\", "\\\\").replace('"', '\\"')) for key, value in labels.items())


def _series(base: Mapping[str, str], held: List[Holder], env: Mapping[str, str]) -> List[Dict[str, str]]:
    if env.get("DCGM_EXPORTER_KUBERNETES", "true").lower() == "false" or not held:
        return [dict(base)]
    virtual = env.get("KUBERNETES_VIRTUAL_GPUS", "").lower() == "true"
    chosen = held if virtual else [h for h in held if not h[3]][:1]
    out = [] if chosen else [dict(base)]
    for namespace, pod, container, replica in chosen:
        labels = dict(base, container=container, namespace=namespace, pod=pod)
        if virtual and replica:
            labels["vgpu"] = replica
        out.append(labels)
    return out


def render(views: List[devmod.GpuView], held: Mapping[str, List[Holder]], env: Mapping[str, str], hostname: str) -> str:
    """The exporter's Prometheus text for these GPUs and holders."""
    bases: List[Tuple[str, Dict[str, str]]] = []
    for gpu in views:
        common = {"gpu": str(gpu.index), "UUID": gpu.uuid, "device": "nvidia%d" % gpu.index, "modelName": gpu.name,
                  "Hostname": hostname}
        if gpu.mig_enabled:
            bases.extend((mig.uuid, dict(common, GPU_I_PROFILE=mig.gi_profile, GPU_I_ID=str(mig.gi_id)))
                         for mig in gpu.mig_devices)
        else:
            bases.append((gpu.uuid, common))
    lines: List[str] = []
    for metric, kind, text in METRICS:
        lines += ["# HELP %s %s" % (metric, text), "# TYPE %s %s" % (metric, kind)]
        for device_id, base in bases:
            lines.extend("%s{%s} 0" % (metric, _label_text(labels)) for labels in _series(base, held.get(device_id, []), env))
    return "\n".join(lines) + "\n"


def refused(pod: str, port: str, why: str) -> ApiError:
    return ApiError(503, "ServiceUnavailable", "error trying to reach service: %s:%s: %s" % (pod, port, why))


def scrape(store: Any, namespace: str, target: str, path: str) -> str:
    """``GET .../pods/NAME[:PORT]/proxy/PATH`` of a DCGM exporter pod; other targets answer 503 as a closed port does."""
    name, _sep, port = target.partition(":")
    pod: Obj = store.get("v1/pods", namespace, name)
    container = exporter_container(pod)
    node_name = (pod.get("spec") or {}).get("nodeName")
    if container is None or port not in ("", str(EXPORTER_PORT)) or (pod.get("status") or {}).get("phase") != "Running":
        raise refused(name, port or "80", "connect: connection refused")
    if path.strip("/") != "metrics":
        raise ApiError(404, "NotFound", "404 page not found")
    node = store.get("v1/nodes", None, node_name)
    state_file = ((node.get("metadata") or {}).get("annotations") or {}).get(STATE_ANNOTATION)
    state = gpustate.load(state_file) if state_file else None
    views = devmod.gpu_views(state) if state is not None and getattr(state, "powered_on", True) else []
    bound = [p for p in store.list("v1/pods").get("items", []) if (p.get("spec") or {}).get("nodeName") == node_name]
    hostname = ((node.get("metadata") or {}).get("labels") or {}).get("kubernetes.io/hostname", node_name)
    return render(views, holders(bound), container_env(container), hostname)


__all__ = ["EXPORTER_PORT", "holders", "render", "scrape"]
