"""The ``resource.k8s.io/v1`` types the lab API server serves, and the Kubernetes version it
simulates.

Scope and names as in Kubernetes 1.34 (https://kubernetes.io/docs/reference/kubernetes-api/
workload-resources/): DeviceClass and ResourceSlice are cluster scoped, ResourceClaim and
ResourceClaimTemplate namespaced; only ResourceClaim has a ``status`` subresource (its
``allocation`` and ``reservedFor``). ``resource.k8s.io/v1`` is GA and served by default from
Kubernetes 1.34 (https://kubernetes.io/blog/2025/09/01/kubernetes-v1-34-dra-updates/): a lab that
simulates an older version (``GPULAB_KUBERNETES_VERSION=1.33.5``) does not serve it, and
``/version`` says that version. The lab serves neither v1beta1 nor v1beta2 in any version.
"""

from __future__ import annotations

import os
import re
from typing import Any, Dict, List, Optional, Tuple

from gpulab.cluster.objects import ResourceType

GROUP = "resource.k8s.io"
VERSION = "v1"
DEVICECLASSES = GROUP + "/v1/deviceclasses"
RESOURCESLICES = GROUP + "/v1/resourceslices"
RESOURCECLAIMS = GROUP + "/v1/resourceclaims"
RESOURCECLAIMTEMPLATES = GROUP + "/v1/resourceclaimtemplates"
VERSION_ENV = "GPULAB_KUBERNETES_VERSION"
DEFAULT_VERSION = "1.36.0"
FIRST_V1 = (1, 34)


def resource_types() -> List[ResourceType]:
    return [
        ResourceType(GROUP, VERSION, "deviceclasses", "DeviceClass", False, "deviceclass", (),
                     status_subresource=False),
        ResourceType(GROUP, VERSION, "resourceslices", "ResourceSlice", False, "resourceslice", (),
                     status_subresource=False,
                     field_selectors=("spec.nodeName", "spec.driver")),
        ResourceType(GROUP, VERSION, "resourceclaims", "ResourceClaim", True, "resourceclaim", ()),
        ResourceType(GROUP, VERSION, "resourceclaimtemplates", "ResourceClaimTemplate", True,
                     "resourceclaimtemplate", (), status_subresource=False),
    ]


def parse_version(text: str) -> Tuple[int, int, int]:
    match = re.match(r"^v?(\d+)\.(\d+)(?:\.(\d+))?", str(text).strip())
    if not match:
        raise ValueError("%s=%r: expected a Kubernetes version such as 1.33.5" % (VERSION_ENV, text))
    return int(match.group(1)), int(match.group(2)), int(match.group(3) or 0)


def kubernetes_version(env: Optional[Dict[str, str]] = None) -> Tuple[int, int, int]:
    """The version the lab simulates: GPULAB_KUBERNETES_VERSION, else 1.36.0."""
    source = os.environ if env is None else env
    return parse_version(source.get(VERSION_ENV) or DEFAULT_VERSION)


def serves_v1(version: Tuple[int, int, int]) -> bool:
    return version[:2] >= FIRST_V1


def version_document(version: Tuple[int, int, int], base: Dict[str, Any]) -> Dict[str, Any]:
    """``/version`` for `version` (the other fields of `base` kept)."""
    document = dict(base)
    document.update(major=str(version[0]), minor=str(version[1]),
                    gitVersion="v%d.%d.%d-gpulab" % version)
    return document


def install(store: Any, version: Tuple[int, int, int]) -> bool:
    """Serve resource.k8s.io/v1 when `version` has it; True when served."""
    if not serves_v1(version):
        return False
    for rt in resource_types():
        store.register_resource(rt)
    return True


__all__ = ["DEVICECLASSES", "GROUP", "RESOURCECLAIMS", "RESOURCECLAIMTEMPLATES", "RESOURCESLICES",
           "VERSION_ENV", "install", "kubernetes_version", "parse_version", "resource_types", "serves_v1",
           "version_document"]
