"""Node Feature Discovery's part the operator depends on, and the driver's OS tag (lab).

- The NFD worker pod (the stand-in chart's ``node-feature-discovery`` subchart) labels its node with
  the OS of the host, as NVIDIA's NFD does from ``/etc/os-release``:
  ``feature.node.kubernetes.io/system-os_release.ID`` and ``...VERSION_ID``. The lab's hosts run on
  this machine, so their OS is this machine's (``Settings.os_release``, GPULAB_OS_RELEASE): the same
  the hosts' Ansible facts report.
- The operator takes the OS of the first GPU node from those labels and appends ``-<ID><VERSION_ID>``
  to the driver, nvidia-fs (GDS) and gdrdrv image tags (the major version only for rhel, rocky and ol);
  not for an image given by digest. Without the labels it cannot render the driver. Written from
  NVIDIA/gpu-operator v26.7.0 controllers/state_manager.go (getGPUNodeOSInfo) and
  controllers/object_controls.go (resolveDriverTag).
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Tuple

from gpulab.cluster.containers import Outcome
from gpulab.cluster.objects import Obj
from gpulab.cluster.operator.common import log_line, section

OS_ID_LABEL = "feature.node.kubernetes.io/system-os_release.ID"
OS_VERSION_LABEL = "feature.node.kubernetes.io/system-os_release.VERSION_ID"
NFD_NAME_LABEL = "app.kubernetes.io/name"
MAJOR_ONLY = ("ol", "rocky", "rhel")


def read_os_release(path: str) -> Tuple[str, str]:
    """(ID, VERSION_ID) of an os-release file; ("", "") when it cannot be read."""
    fields: Dict[str, str] = {}
    try:
        with open(path, encoding="utf-8") as handle:
            for line in handle:
                key, sep, value = line.strip().partition("=")
                if sep:
                    fields[key] = value.strip().strip('"').strip("'")
    except OSError:
        return "", ""
    return fields.get("ID", ""), fields.get("VERSION_ID", "")


def is_nfd_worker(pod: Obj) -> bool:
    labels = pod["metadata"].get("labels") or {}
    return labels.get(NFD_NAME_LABEL) == "node-feature-discovery" and labels.get("role") == "worker"


def gpu_node_os_tag(nodes: List[Obj]) -> Tuple[Optional[str], str]:
    """(the OS tag of the first GPU node, "") or (None, why not)."""
    gpu_nodes = sorted((n for n in nodes if (n["metadata"].get("labels") or {}).get("nvidia.com/gpu.present") == "true"),
                       key=lambda n: n["metadata"]["name"])
    if not gpu_nodes:
        return None, "no nodes found with GPU present"
    labels = gpu_nodes[0]["metadata"].get("labels") or {}
    for key in (OS_ID_LABEL, OS_VERSION_LABEL):
        if not labels.get(key):
            return None, "failed to retrieve GPU node OS info: unable to retrieve OS from label %s" % key
    os_id, version = labels[OS_ID_LABEL], labels[OS_VERSION_LABEL]
    if os_id in MAJOR_ONLY:
        version = version.split(".")[0]
    return os_id + version, ""


def _image(spec_section: Mapping[str, Any], os_tag: str) -> str:
    image = "%s/%s:%s" % (spec_section.get("repository"), spec_section.get("image"), spec_section.get("version"))
    if str(spec_section.get("version", "")).startswith("sha256:"):
        return image.replace(":sha256:", "@sha256:")
    return "%s-%s" % (image, os_tag)


def driver_pod_parts(spec: Mapping[str, Any], os_tag: str) -> Tuple[List[Obj], List[Obj], List[str]]:
    """(init containers, containers, pull secret names) of the driver DaemonSet: the driver manager
    (driver.manager, no OS tag), the driver and, when enabled, the nvidia-fs and gdrdrv sidecars."""
    driver = section(spec, "driver")
    init = []
    manager = section(spec, "driver", "manager")
    if manager.get("repository") and manager.get("image"):
        init.append({"name": "k8s-driver-manager",
                     "image": "%s/%s:%s" % (manager["repository"], manager["image"], manager.get("version"))})
    containers = [{"name": "nvidia-driver-ctr", "image": _image(driver, os_tag), "env": []}]
    secrets = [str(s) for s in driver.get("imagePullSecrets") or []]
    for key, name in (("gds", "nvidia-fs-ctr"), ("gdrcopy", "nvidia-gdrcopy-ctr")):
        part = section(spec, key)
        if part.get("enabled") is True:
            containers.append({"name": name, "image": _image(part, os_tag)})
            secrets += [str(s) for s in part.get("imagePullSecrets") or [] if str(s) not in secrets]
    return init, containers, secrets


class NfdWorkerProgram:
    """The NFD worker container: labels its node with the host's OS when it starts."""

    gpu_client = False

    def __init__(self, context: Any):
        self.context = context

    def start(self, pod: Obj, container: Obj, allocated: List[Any]) -> Outcome:
        del container, allocated
        os_id, version = read_os_release(self.context.settings.os_release)
        node = pod["spec"].get("nodeName")
        if node and os_id:
            self.context.set_labels(node, {OS_ID_LABEL: os_id, OS_VERSION_LABEL: version})
        return Outcome(log=log_line("nfd-worker labelled %s: %s %s" % (node, os_id, version)))

    def check(self, pod: Obj, container: Obj) -> Optional[Outcome]:
        del pod, container
        return None

    def stop(self, pod: Obj) -> None:
        del pod


__all__ = ["MAJOR_ONLY", "NfdWorkerProgram", "OS_ID_LABEL", "OS_VERSION_LABEL", "driver_pod_parts", "gpu_node_os_tag",
           "is_nfd_worker", "read_os_release"]
