"""Authentication and RBAC authorization of the lab's virtual API server.

As Kubernetes does it (docs/reference/specs.md, "Kubernetes RBAC authorization"):

- Roles, ClusterRoles, RoleBindings and ClusterRoleBindings (``rbac.authorization.k8s.io/v1``)
  are API objects like any other (the store serves them; this module registers their types).
- Bearer tokens map to an identity. The lab's admin token (the one in ``DIR/kubeconfig``) is
  user ``gpulab-admin`` in group ``system:masters``, which Kubernetes lets do everything without
  consulting RBAC: the lab behaves for it exactly as before RBAC existed. Tokens minted with
  ``mint()`` (``POST /lab/tokens``; ``gpulab.cluster.access`` writes a kubeconfig with one) are
  ServiceAccount identities ``system:serviceaccount:<ns>:<name>`` in the groups
  ``system:serviceaccounts``, ``system:serviceaccounts:<ns>`` and ``system:authenticated``.
- A request is allowed when a rule of a role bound to the identity matches its verb (get, list,
  watch, create, update, patch, delete, deletecollection), API group, resource (``pods``, or
  ``pods/eviction`` for a subresource) and, when the rule lists resourceNames, its object name.
  ClusterRoleBindings grant everywhere; RoleBindings only in their namespace. Rules only add
  (there is no deny). A dry-run request needs the same verb as the real one.
- Denied: 403 with a Status body whose message has Kubernetes' form
  ``<resource> ["<name>"] is forbidden: User "<user>" cannot <verb> resource "<resource>" in API
  group "<group>" in the namespace "<ns>"`` (or ``at the cluster scope``).
- Discovery (/api, /apis, /version, ...) is allowed to every authenticated identity (Kubernetes'
  default ``system:discovery`` binding).

Modelling choices: no privilege-escalation check on creating roles or bindings, no aggregated
ClusterRoles, no nonResourceURLs rules, no impersonation; minted tokens live as long as the server
process.
"""

from __future__ import annotations

import json
import secrets
import threading
from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Optional, Tuple

from gpulab.cluster.errors import ApiError, bad_request, qualified
from gpulab.cluster.objects import Obj, ResourceType
from gpulab.cluster.store import Store

GROUP = "rbac.authorization.k8s.io"
ADMIN_USER = "gpulab-admin"
MASTERS = "system:masters"
AUTHENTICATED = "system:authenticated"
VERBS = ("get", "list", "watch", "create", "update", "patch", "delete", "deletecollection")


def resource_types() -> List[ResourceType]:
    """The four RBAC types, served by the store once registered."""
    def rbac_type(plural: str, kind: str, namespaced: bool) -> ResourceType:
        return ResourceType(GROUP, "v1", plural, kind, namespaced, kind.lower(), (),
                            status_subresource=False, has_generation=False)
    return [rbac_type("roles", "Role", True), rbac_type("clusterroles", "ClusterRole", False),
            rbac_type("rolebindings", "RoleBinding", True),
            rbac_type("clusterrolebindings", "ClusterRoleBinding", False)]


@dataclass(frozen=True)
class Identity:
    user: str
    groups: Tuple[str, ...]

    @property
    def superuser(self) -> bool:
        return MASTERS in self.groups


ADMIN = Identity(ADMIN_USER, (MASTERS, AUTHENTICATED))


def service_account_user(namespace: str, name: str) -> str:
    return "system:serviceaccount:%s:%s" % (namespace, name)


def service_account_identity(namespace: str, name: str) -> Identity:
    return Identity(service_account_user(namespace, name),
                    ("system:serviceaccounts", "system:serviceaccounts:%s" % namespace,
                     AUTHENTICATED))


@dataclass(frozen=True)
class Attributes:
    """What a resource request asks for (Kubernetes' authorizer attributes)."""
    verb: str
    group: str
    resource: str
    subresource: Optional[str]
    namespace: Optional[str]
    name: Optional[str]

    @property
    def full_resource(self) -> str:
        return self.resource + ("/" + self.subresource if self.subresource else "")


# --------------------------------------------------------------------- matching

def rule_allows(rule: Obj, attrs: Attributes) -> bool:
    """One PolicyRule against the request (verbs, apiGroups, resources, resourceNames)."""
    verbs = rule.get("verbs") or []
    groups = rule.get("apiGroups") or []
    resources = rule.get("resources") or []
    names = rule.get("resourceNames") or []
    if "*" not in verbs and attrs.verb not in verbs:
        return False
    if "*" not in groups and attrs.group not in groups:
        return False
    wanted = attrs.full_resource
    resource_ok = "*" in resources or wanted in resources or (
        attrs.subresource is not None and ("%s/*" % attrs.resource in resources
                                           or "*/%s" % attrs.subresource in resources))
    if not resource_ok:
        return False
    return not names or (attrs.name is not None and attrs.name in names)


def subject_matches(subject: Obj, identity: Identity, binding_namespace: str) -> bool:
    kind, name = subject.get("kind"), subject.get("name")
    if kind == "User":
        return name == identity.user
    if kind == "Group":
        return name in identity.groups
    if kind == "ServiceAccount":
        namespace = subject.get("namespace") or binding_namespace
        return bool(namespace) and identity.user == service_account_user(namespace, name or "")
    return False


def forbidden(identity: Identity, attrs: Attributes, rt: ResourceType,
              reason: str = "") -> ApiError:
    """403 with the message kube-apiserver writes for a denied resource request."""
    scope = ('in the namespace "%s"' % attrs.namespace if attrs.namespace
             else "at the cluster scope")
    why = 'User "%s" cannot %s resource "%s" in API group "%s" %s' % (
        identity.user, attrs.verb, attrs.full_resource, attrs.group, scope)
    if reason:
        why += ": " + reason
    target = qualified(rt) + (' "%s"' % attrs.name if attrs.name else "")
    details: Dict[str, Any] = {"kind": rt.plural}
    if attrs.name:
        details["name"] = attrs.name
    if rt.group:
        details["group"] = rt.group
    return ApiError(403, "Forbidden", "%s is forbidden: %s" % (target, why), details)


# ------------------------------------------------------------------ authorizer

class Authorizer:
    """Tokens -> identities, and RBAC decisions over the objects in the store."""

    def __init__(self, store: Store, admin_token: Optional[str]):
        self.store = store
        self.admin_token = admin_token
        self._tokens: Dict[str, Identity] = {}
        self._lock = threading.Lock()
        known = {rt.key for rt in store.resources()}
        for rt in resource_types():
            if rt.key not in known:
                store.register_resource(rt)

    def authenticate(self, authorization: str) -> Optional[Identity]:
        """The identity of an ``Authorization`` header; None when the token is unknown."""
        token = authorization[len("Bearer "):] if authorization.startswith("Bearer ") else None
        with self._lock:
            minted = self._tokens.get(token or "")
        if minted is not None:
            return minted
        if self.admin_token is None or token == self.admin_token:
            return ADMIN
        return None

    def mint(self, namespace: str, service_account: str) -> Tuple[str, Identity]:
        """A new bearer token for an existing ServiceAccount (404 when it does not exist)."""
        self.store.get("v1/serviceaccounts", namespace, service_account)
        token = secrets.token_urlsafe(32)
        identity = service_account_identity(namespace, service_account)
        with self._lock:
            self._tokens[token] = identity
        return token, identity

    def authorize(self, identity: Identity, attrs: Attributes, rt: ResourceType) -> None:
        """Return when allowed; raise the 403 ApiError otherwise."""
        if identity.superuser:
            return
        missing: List[str] = []
        for rule in self._rules(identity, attrs.namespace, missing):
            if rule_allows(rule, attrs):
                return
        reason = "RBAC: " + ", ".join(missing) if missing else ""
        raise forbidden(identity, attrs, rt, reason)

    def _rules(self, identity: Identity, namespace: Optional[str],
               missing: List[str]) -> Iterator[Obj]:
        """Rules of every role bound to the identity that apply in `namespace`."""
        for binding in self.store.items("%s/v1/clusterrolebindings" % GROUP):
            if self._binds(binding, identity, ""):
                yield from self._role_rules(binding, None, missing)
        if not namespace:
            return
        for binding in self.store.items("%s/v1/rolebindings" % GROUP, namespace):
            if self._binds(binding, identity, namespace):
                yield from self._role_rules(binding, namespace, missing)

    @staticmethod
    def _binds(binding: Obj, identity: Identity, namespace: str) -> bool:
        return any(subject_matches(s, identity, namespace)
                   for s in binding.get("subjects") or [] if isinstance(s, dict))

    def _role_rules(self, binding: Obj, namespace: Optional[str],
                    missing: List[str]) -> List[Obj]:
        ref = binding.get("roleRef") or {}
        kind, name = ref.get("kind"), ref.get("name") or ""
        try:
            if kind == "ClusterRole":
                role = self.store.get("%s/v1/clusterroles" % GROUP, None, name)
            elif kind == "Role" and namespace:
                role = self.store.get("%s/v1/roles" % GROUP, namespace, name)
            else:
                return []
        except ApiError:
            missing.append('%s.%s "%s" not found' % (str(kind).lower(), GROUP, name))
            return []
        return [r for r in role.get("rules") or [] if isinstance(r, dict)]

    # ------------------------------------------------------------- lab endpoint

    def lab_tokens(self, method: str, body: bytes) -> Tuple[int, Obj]:
        """``POST /lab/tokens {"namespace", "serviceAccount"}`` -> ``{"token", "user"}``."""
        if method != "POST":
            raise ApiError(405, "MethodNotAllowed", "only POST is allowed on /lab/tokens")
        try:
            spec = json.loads(body.decode() or "{}")
        except ValueError as exc:
            raise bad_request("bad token request: %s" % exc) from None
        if not isinstance(spec, dict) or not spec.get("namespace") or \
                not spec.get("serviceAccount"):
            raise bad_request('a token request needs "namespace" and "serviceAccount"')
        token, identity = self.mint(str(spec["namespace"]), str(spec["serviceAccount"]))
        return 201, {"token": token, "user": identity.user, "groups": list(identity.groups)}


__all__ = ["Authorizer", "Attributes", "Identity", "ADMIN", "GROUP", "VERBS", "forbidden",
           "resource_types", "rule_allows", "service_account_identity", "subject_matches"]
