# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Kubernetes resource table (``ResourceType``, ``BUILTIN_TYPES``): each kind's API version, plural,
scope and path; object-name rules as the API server validates them; label selectors.

Pure: ``_k8s.K8sClient`` sends requests to these paths."""

from __future__ import annotations

import re
from typing import Any, Dict, Optional, Union

from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._api_errors import K8sError


# Object names as the API server validates them (docs/reference/specs.md §12):
# most kinds need a DNS-1123 subdomain, namespaces a DNS-1123 label, RBAC objects only a valid
# path segment (they may hold ':').
_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_NAMED_KINDS = frozenset(["Namespace"])
_PATH_SEGMENT_KINDS = frozenset(["ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"])


def name_problem(kind: str, name: Any) -> Optional[str]:
    """Why ``name`` cannot name an object of ``kind`` (None when it can)."""
    text = name if isinstance(name, str) else ""
    if kind in _PATH_SEGMENT_KINDS:
        if text and text not in (".", "..") and not any(c in text for c in "/%") and text.isprintable():
            return None
        return "invalid %s name %r: it may not be empty, '.' or '..', nor contain '/' or '%%'" % (kind, name)
    if kind in _LABEL_NAMED_KINDS:
        if _DNS1123_LABEL.fullmatch(text):
            return None
        return ("invalid %s name %r: it must be a DNS-1123 label (at most 63 lower-case letters, digits or '-', "
                "starting and ending with a letter or digit)" % (kind, name))
    if len(text) <= 253 and _DNS1123_SUBDOMAIN.fullmatch(text):
        return None
    return ("invalid %s name %r: it must be a DNS-1123 subdomain (at most 253 lower-case letters, digits, '-' or '.', "
            "starting and ending with a letter or digit)" % (kind, name))


class ResourceType:
    """One API resource: apiVersion, kind, plural and scope."""

    __slots__ = ("api_version", "kind", "plural", "namespaced")

    def __init__(self, api_version: str, kind: str, plural: str, namespaced: bool) -> None:
        self.api_version = api_version
        self.kind = kind
        self.plural = plural
        self.namespaced = namespaced

    def __repr__(self):
        return "ResourceType(%r, %r, %r, %r)" % (self.api_version, self.kind, self.plural, self.namespaced)

    def path(self, name: Optional[str] = None, namespace: Optional[str] = None, subresource: Optional[str] = None) -> str:
        """REST path of the collection, or of one object (and a subresource of it). Names are
        validated as the API server does (``name_problem``) before any request is built."""
        for problem in (name_problem("Namespace", namespace) if namespace else None,
                        name_problem(self.kind, name) if name else None):
            if problem:
                raise K8sError(problem + "; nothing was sent")
        base = "/api/v1" if self.api_version == "v1" else "/apis/" + self.api_version
        if self.namespaced:
            if not namespace:
                if name:
                    raise K8sError("%s %s: a namespace is required" % (self.kind, name))
            else:
                base += "/namespaces/" + namespace
        path = base + "/" + self.plural
        if name:
            path += "/" + name
            if subresource:
                path += "/" + subresource
        return path


BUILTIN_TYPES: Dict[str, ResourceType] = dict((rt.kind, rt) for rt in [
    ResourceType("v1", "Namespace", "namespaces", False),
    ResourceType("v1", "Node", "nodes", False),
    ResourceType("v1", "ConfigMap", "configmaps", True),
    ResourceType("v1", "Secret", "secrets", True),
    ResourceType("v1", "Pod", "pods", True),
    ResourceType("v1", "Event", "events", True),
    ResourceType("v1", "Service", "services", True),
    ResourceType("v1", "ServiceAccount", "serviceaccounts", True),
    ResourceType("apps/v1", "DaemonSet", "daemonsets", True),
    ResourceType("apps/v1", "Deployment", "deployments", True),
    ResourceType("apps/v1", "ReplicaSet", "replicasets", True),
    ResourceType("apps/v1", "StatefulSet", "statefulsets", True),
    ResourceType("policy/v1", "PodDisruptionBudget", "poddisruptionbudgets", True),
    ResourceType("coordination.k8s.io/v1", "Lease", "leases", True),
    ResourceType("apiextensions.k8s.io/v1", "CustomResourceDefinition", "customresourcedefinitions", False),
    ResourceType("nvidia.com/v1", "ClusterPolicy", "clusterpolicies", False),
    ResourceType("kueue.x-k8s.io/v1beta2", "ResourceFlavor", "resourceflavors", False),
    ResourceType("kueue.x-k8s.io/v1beta2", "ClusterQueue", "clusterqueues", False),
    ResourceType("kueue.x-k8s.io/v1beta2", "LocalQueue", "localqueues", True),
    ResourceType("resource.k8s.io/v1", "DeviceClass", "deviceclasses", False),
    ResourceType("resource.k8s.io/v1", "ResourceSlice", "resourceslices", False),
    ResourceType("resource.k8s.io/v1", "ResourceClaim", "resourceclaims", True),
    ResourceType("resource.k8s.io/v1", "ResourceClaimTemplate", "resourceclaimtemplates", True),
    # Cluster API (kubernetes-sigs/cluster-api v1.14.0, the stored version): node_group_annotations
    ResourceType("cluster.x-k8s.io/v1beta2", "MachineDeployment", "machinedeployments", True),
])


KindRef = Union[str, ResourceType]


def resource_type_of(kind: KindRef, api_version: Optional[str] = None) -> ResourceType:
    """Resolve a kind name (optionally checked against an apiVersion) or pass a ResourceType."""
    if isinstance(kind, ResourceType):
        return kind
    known = BUILTIN_TYPES.get(kind)
    if known is None or (api_version and known.api_version != api_version):
        raise K8sError(
            "unknown resource kind %r%s: pass a ResourceType(api_version, kind, plural, namespaced)"
            % (kind, " (%s)" % api_version if api_version else ""))
    return known


def label_selector(labels: Dict[str, Optional[str]]) -> str:
    """{"a": "b", "c": None} -> "a=b,c" (None means: the label exists)."""
    return ",".join(key if value is None else "%s=%s" % (key, value) for key, value in sorted(labels.items()))
