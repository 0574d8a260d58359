# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What users write under the DRA backend, from the fleet plan (pure, no I/O; docs/dra.md).

Facts followed (NVIDIA's DRA driver for GPUs, kubernetes-sigs/dra-driver-nvidia-gpu v0.5.0):

- the kubelet plugin publishes, per node, one device per full GPU that has MIG off (name
  ``gpu-<minor>``, attribute ``type`` ``gpu``) and one per MIG device that exists when it starts on a
  GPU with MIG on (name ``gpu-<minor>-mig-<profile without dots>-<profile id>-<placement start>``,
  ``type`` ``mig``, ``profile``, ``parentUUID``); a MIG-enabled GPU itself is not published
  (cmd/gpu-kubelet-plugin/nvlib.go ``enumerateAllPossibleDevices``, deviceinfo.go ``GetDevice``,
  mig.go ``CommonAttributesMig`` and ``ToCanonicalName``), all under the driver ``gpu.nvidia.com``;
- its chart's DeviceClasses ``gpu.nvidia.com`` and ``mig.nvidia.com`` select on ``device.driver``
  and the ``type`` attribute (deployments/helm/dra-driver-nvidia-gpu/templates/deviceclass-gpu.yaml,
  deviceclass-mig.yaml);
- time-slicing and MPS are a claim's opaque ``GpuConfig`` (``resource.nvidia.com/v1beta1``,
  ``sharing.strategy`` ``TimeSlicing`` | ``MPS``), refused unless the alpha feature gates
  ``TimeSlicingSettings`` / ``MPSSupport`` are on (api/nvidia.com/resource/v1beta1/validate.go,
  pkg/featuregates/featuregates.go).

One device kind per MIG profile (``mig-1g-10gb``), per full-GPU product (``gpu-nvidia-h100-80gb-hbm3``)
and per shared full GPU (``...-time-slicing`` / ``...-mps``). Each kind gets a DeviceClass of its own
(``<kind>.gpufleet.sharing``, its CEL selector) because Kueue charges a claim by its DeviceClass
(``deviceClassMappings``, ``_dra_objects``), and a ResourceClaimTemplate named after the kind in each
namespace the inventory names; the template's request repeats the kind's selector, so it selects the
same devices through the driver's own classes too.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.gpufleet.sharing.plugins.module_utils.gpu._mig_catalog import find_model
from ansible_collections.gpufleet.sharing.plugins.module_utils.sharing._sharing import GPU_RESOURCE
from ansible_collections.gpufleet.sharing.plugins.module_utils.sharing._node_gpus import mig_resource_name

DRIVER = "gpu.nvidia.com"
API_VERSION = "resource.k8s.io/v1"
CLASS_SUFFIX = ".gpufleet.sharing"
OWNER_KEY = "app.kubernetes.io/managed-by"
OWNER_VALUE = "gpufleet.sharing"
KIND_LABEL = "gpufleet.sharing/device-kind"
REQUEST = "gpu"
# sharing strategy of the plan -> (the driver's GpuConfig strategy, the alpha feature gate it needs)
SHARING = {"time-slicing": ("TimeSlicing", "TimeSlicingSettings"), "mps": ("MPS", "MPSSupport")}
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
# A kind name is a label value (gpufleet.sharing/device-kind, <= 63) and, with CLASS_SUFFIX, the DeviceClass name,
# which Kueue validates as a label key name (<= 63, pkg/config/validation.go): so at most 63 - 17 = 46 characters.
MAX_KIND = 63 - len(CLASS_SUFFIX)
_DIGEST = 8


def slug(text: str) -> str:
    """Lower case, every run of other characters one '-' (a DNS label part)."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def bounded(name: str) -> str:
    """``name`` when it fits MAX_KIND; else its first characters, '-', and the first 8 hex digits of its SHA-256:
    short, stable across runs and versions, and distinct for distinct names (docs/dra.md, "Device kinds")."""
    if len(name) <= MAX_KIND:
        return name
    digest = hashlib.sha256(name.encode("utf-8")).hexdigest()[:_DIGEST]
    return "%s-%s" % (name[:MAX_KIND - _DIGEST - 1].rstrip("-"), digest)


def profile_slug(profile: str) -> str:
    """A MIG profile as a DNS label part: a '-' of the name is doubled, every other character outside [a-z0-9] is
    one '-' (so 1g.24gb-me and 1g.24gb+me, two profiles of the RTX PRO 6000, stay two kinds)."""
    return re.sub(r"[^a-z0-9-]", "-", profile.lower().replace("-", "--")).strip("-")


def _cel_string(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


@dataclass(frozen=True)
class DeviceKind:
    """One kind of device a pod can ask for. ``resource``: the device plugin's name for it (Kueue's quota key)."""

    name: str
    type: str  # gpu | mig
    profile: Optional[str] = None
    product: Optional[str] = None
    sharing: Optional[str] = None  # None | time-slicing | mps

    @property
    def resource(self) -> str:
        return mig_resource_name(self.profile or "") if self.type == "mig" else GPU_RESOURCE

    @property
    def device_class(self) -> str:
        return self.name + CLASS_SUFFIX

    @property
    def driver_class(self) -> str:
        """The driver chart's own DeviceClass of this type (``gpu.nvidia.com`` / ``mig.nvidia.com``)."""
        return "%s.nvidia.com" % self.type

    def selector(self) -> str:
        """The CEL expression that selects exactly this kind's devices."""
        attrs = "device.attributes[%s]" % _cel_string(DRIVER)
        parts = ["device.driver == %s" % _cel_string(DRIVER), "%s.type == %s" % (attrs, _cel_string(self.type))]
        if self.type == "mig":
            parts.append("%s.profile == %s" % (attrs, _cel_string(self.profile or "")))
        elif self.product:
            parts.append("%s.productName == %s" % (attrs, _cel_string(self.product)))
        return " && ".join(parts)

    def as_dict(self) -> Dict[str, Any]:
        return {"name": self.name, "type": self.type, "profile": self.profile, "product": self.product,
                "sharing": self.sharing, "resource": self.resource, "device_class": self.device_class,
                "selector": self.selector()}


def mig_kind(profile: str) -> DeviceKind:
    return DeviceKind(bounded("mig-" + profile_slug(profile)), "mig", profile=profile)


def gpu_kind(product: Optional[str], sharing: Optional[str] = None) -> DeviceKind:
    name = "gpu-" + slug(product) if product else "gpu"
    return DeviceKind(bounded(name + ("-" + sharing if sharing else "")), "gpu", product=product, sharing=sharing)


@dataclass(frozen=True)
class PlannedDevice:
    """One device a node's kubelet plugin must publish: its kind and its (parent) GPU."""

    node: str
    gpu: int  # the GPU's index (the driver names devices by the GPU's minor number)
    uuid: Optional[str]  # the GPU's UUID when the host's read gives it
    kind: DeviceKind

    @property
    def parent(self) -> str:
        return self.uuid or "gpu-%d" % self.gpu


def _product(gpu: Mapping[str, Any]) -> Optional[str]:
    """The GPU's productName as NVML prints it: the read's name, else the catalog's first name."""
    if gpu.get("product"):
        return str(gpu["product"])
    model = find_model(str(gpu.get("model") or ""), gpu.get("pci_device_id")) if gpu.get("model") else None
    return model.product_names[0] if model is not None and model.product_names else None


def node_devices(node: str, gpus: Sequence[Mapping[str, Any]], facts: Sequence[Mapping[str, Any]] = (),
                 sharing: Optional[str] = None) -> List[PlannedDevice]:
    """The devices of one node from its planned GPUs (``[{model, count, mig, product}]``, in index order)
    and, when known, its ``gpu_facts`` (their UUIDs). ``sharing``: the node's sharing strategy
    (time-slicing, mps), which makes its full GPUs a shared kind."""
    uuids = {int(f.get("index", i)): f.get("uuid") for i, f in enumerate(facts)}
    devices: List[PlannedDevice] = []
    index = 0
    for gpu in gpus:
        for _unused in range(int(gpu.get("count", 1) or 1)):
            layout = gpu.get("mig") or {}
            if layout:
                devices.extend(PlannedDevice(node, index, uuids.get(index), mig_kind(profile))
                               for profile, n in sorted(layout.items()) for _n in range(int(n)))
            else:
                shared = sharing if sharing in SHARING else None
                devices.append(PlannedDevice(node, index, uuids.get(index), gpu_kind(_product(gpu), shared)))
            index += 1
    return devices


def fleet_kinds(devices: Mapping[str, Sequence[PlannedDevice]]) -> Dict[str, DeviceKind]:
    """Every device kind of the DRA nodes, by name."""
    return {d.kind.name: d.kind for node in sorted(devices) for d in devices[node]}


def kind_capacity(devices: Mapping[str, Sequence[PlannedDevice]]) -> Dict[str, Dict[str, int]]:
    """Per node, devices per resource name (the Kueue quota key of each kind): a quota's capacity under DRA."""
    result: Dict[str, Dict[str, int]] = {}
    for node, planned in sorted(devices.items()):
        result[node] = dict(sorted(Counter(d.kind.resource for d in planned).items()))
    return result


def gate_problems(kinds: Mapping[str, DeviceKind], gates: Mapping[str, bool]) -> List[str]:
    """Shared kinds need the driver's alpha gate; the driver refuses a GpuConfig without it."""
    problems = []
    for kind in kinds.values():
        if kind.sharing:
            strategy, gate = SHARING[kind.sharing]
            if not gates.get(gate):
                problems.append("device kind %s: %s through the DRA driver needs its alpha feature gate %s=true "
                                "(the driver refuses sharing.strategy %s without it)" % (kind.name, kind.sharing, gate, strategy))
    return problems


@dataclass(frozen=True)
class TemplateRequest:
    """The inventory's ``gpufleet_dra_claim_templates`` entry: namespaces, and the kinds (empty: all)."""

    namespaces: Tuple[str, ...]
    kinds: Tuple[str, ...] = ()
    count: int = 1


# Bounds of gpufleet_dra_claim_templates (issue 43 #1: a count of 10^9 reached the API server).
# A claim's request is allocated at most AllocationResultsMaxSize = 32 devices (kubernetes
# pkg/apis/resource/types.go, the same in k8s.io/api resource/v1), so a larger count can never be met.
MAX_COUNT = 32
MAX_ENTRIES = 64  # entries of the list
MAX_NAMESPACES = 256  # namespaces of one entry
MAX_KINDS = 64  # kinds of one entry
MAX_KIND_LENGTH = 253  # a kind, a MIG profile or a resource name


def _count_problem(where: str, count: Any) -> Optional[str]:
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        return "%s: count must be a whole number >= 1, got %r" % (where, count)
    if count > MAX_COUNT:
        return ("%s: count must be at most %d (Kubernetes gives one request at most %d devices: "
                "AllocationResultsMaxSize), got %r" % (where, MAX_COUNT, MAX_COUNT, count))
    return None


def _names_problems(where: str, namespaces: Any, kinds: Any) -> List[str]:
    problems = []
    if len(namespaces) > MAX_NAMESPACES:
        problems.append("%s: %d namespaces, at most %d in one entry" % (where, len(namespaces), MAX_NAMESPACES))
    problems += ["%s: namespace %r is not a DNS label" % (where, ns)
                 for ns in namespaces[:MAX_NAMESPACES] if not (_DNS_LABEL.fullmatch(str(ns)) and len(str(ns)) <= 63)]
    if len(kinds) > MAX_KINDS:
        problems.append("%s: %d kinds, at most %d in one entry" % (where, len(kinds), MAX_KINDS))
    problems += ["%s: kind %r must be a device kind, a MIG profile or a MIG resource name (a string of at most %d)"
                 % (where, str(k)[:80], MAX_KIND_LENGTH) for k in kinds[:MAX_KINDS]
                 if not isinstance(k, str) or not k or len(k) > MAX_KIND_LENGTH]
    return problems


def parse_requests(raw: Sequence[Any]) -> Tuple[List[TemplateRequest], List[str]]:
    """The entries of ``claim_templates``, each checked and bounded; every problem names the entry."""
    problems: List[str] = []
    requests = []
    raw = list(raw or ())
    if len(raw) > MAX_ENTRIES:
        return [], ["claim_templates: %d entries, at most %d (one entry names many namespaces and kinds)"
                    % (len(raw), MAX_ENTRIES)]
    for i, entry in enumerate(raw):
        where = "claim_templates[%d]" % i
        if not isinstance(entry, Mapping):
            problems.append("%s: must be a mapping {namespaces, kinds, count}" % where)
            continue
        known = len(problems)
        unknown = sorted(set(entry) - {"namespaces", "kinds", "count"})
        namespaces = entry.get("namespaces") or []
        kinds = entry.get("kinds") or []
        count = entry.get("count", 1)
        problems += ["%s: unknown key %s (namespaces, kinds, count)" % (where, k) for k in unknown]
        if isinstance(namespaces, (str, Mapping)) or not isinstance(namespaces, Sequence) or not namespaces:
            problems.append("%s: namespaces must be a non-empty list of namespace names" % where)
            namespaces = []
        if isinstance(kinds, (str, Mapping)) or not isinstance(kinds, Sequence):
            problems.append("%s: kinds must be a list of device kinds or MIG profiles" % where)
            kinds = []
        bad_count = _count_problem(where, count)
        problems += _names_problems(where, list(namespaces), list(kinds)) + ([bad_count] if bad_count else [])
        if len(problems) > known:
            continue
        requests.append(TemplateRequest(tuple(str(n) for n in namespaces), tuple(str(k) for k in kinds), count))
    return requests, problems


def capacity_problems(requests: Sequence[TemplateRequest], kinds: Mapping[str, DeviceKind],
                      devices: Mapping[str, Sequence[PlannedDevice]]) -> List[str]:
    """A count no DRA node can meet: a claim's devices come from one node (its allocation has one node
    selector, and the driver publishes each node's devices in that node's ResourceSlices)."""
    most: Dict[str, int] = {}
    for planned in devices.values():
        for name, number in Counter(d.kind.name for d in planned).items():
            most[name] = max(most.get(name, 0), number)
    problems = []
    for i, request in enumerate(requests):
        chosen = [resolve_kind(k, kinds) for k in request.kinds] if request.kinds else list(kinds.values())
        for kind in sorted({k.name: k for k in chosen if k is not None}.values(), key=lambda k: k.name):
            if request.count > most.get(kind.name, 0):
                problems.append("claim_templates[%d]: count %d for %s, but no DRA node has more than %d such devices "
                                "(a claim's devices come from one node): no pod could ever get them"
                                % (i, request.count, kind.name, most.get(kind.name, 0)))
    return problems


def resolve_kind(wanted: str, kinds: Mapping[str, DeviceKind]) -> Optional[DeviceKind]:
    """A kind by name (``mig-1g-10gb``), by MIG profile (``1g.10gb``) or by resource (``nvidia.com/mig-1g.10gb``)."""
    for kind in kinds.values():
        if wanted in (kind.name, kind.profile, kind.resource if kind.type == "mig" else None):
            return kind
    return None
