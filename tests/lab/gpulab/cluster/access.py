"""Restricted access to a running lab cluster: a ServiceAccount token in a kubeconfig of its own.

    from gpulab.cluster import access
    access.apply(lab_dir, objects)            # as the lab admin: create or replace objects
    user = access.service_account_kubeconfig(lab_dir, "gpufleet", "rollout", "/tmp/kc")

    python -m gpulab.cluster.access --dir DIR --service-account NS/NAME --kubeconfig OUT [--apply FILE]

The admin kubeconfig (DIR/kubeconfig) is cluster-admin (group system:masters) and stays as it
is; the kubeconfig written here authenticates as ``system:serviceaccount:NS:NAME`` and gets only
what RBAC bindings grant it (see rbac.py). The namespace and the ServiceAccount are created
when missing. The token is written only into the kubeconfig (mode 0600), never printed.
"""

from __future__ import annotations

import argparse
import json
import ssl
import sys
import urllib.error
import urllib.request
from typing import Any, Dict, Iterable, List, Optional

import yaml

from gpulab.cluster import faults as _faults
from gpulab.cluster.server import write_kubeconfig

CORE = "/api/v1"
RBAC = "/apis/rbac.authorization.k8s.io/v1"
PATHS = {"Namespace": (CORE, "namespaces", False), "ServiceAccount": (CORE, "serviceaccounts", True),
         "ClusterRole": (RBAC, "clusterroles", False),
         "ClusterRoleBinding": (RBAC, "clusterrolebindings", False),
         "Role": (RBAC, "roles", True), "RoleBinding": (RBAC, "rolebindings", True)}


def _info(lab_dir: str) -> Dict[str, Any]:
    with open("%s/cluster.json" % lab_dir, encoding="utf-8") as handle:
        return json.load(handle)


def admin_request(lab_dir: str, method: str, path: str, body: Optional[Dict[str, Any]] = None,
                  token: Optional[str] = None) -> Dict[str, Any]:
    """A JSON API request with the admin token (or `token`); returns the decoded body, also for
    error answers (a Status), with its HTTP code under the key ``"_code"``."""
    info = _info(lab_dir)
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(
        info["url"] + path, data=data, method=method,
        headers={"Content-Type": "application/json",
                 "Authorization": "Bearer %s" % (token or info["token"])})
    context = ssl.create_default_context(cafile=info["ca_file"])
    try:
        with urllib.request.urlopen(request, timeout=10, context=context) as response:
            answer, code = json.loads(response.read().decode() or "{}"), response.status
    except urllib.error.HTTPError as exc:
        answer, code = json.loads(exc.read().decode() or "{}"), exc.code
    answer["_code"] = code
    return answer


def create_namespaces(lab_dir: str, names: Iterable[str]) -> None:
    """Namespaces created with the admin token (a cluster admin's step; one that exists is fine)."""
    for name in names:
        answer = admin_request(lab_dir, "POST", "/api/v1/namespaces",
                               {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
        if answer["_code"] not in (201, 409):
            raise RuntimeError("cannot create namespace %s: %s" % (name, answer.get("message")))


def _object_path(obj: Dict[str, Any], named: bool) -> str:
    prefix, plural, namespaced = PATHS[obj["kind"]]
    meta = obj.get("metadata") or {}
    ns = "/namespaces/%s" % (meta.get("namespace") or "default") if namespaced else ""
    return "%s%s/%s%s" % (prefix, ns, plural, "/" + meta["name"] if named else "")


def documents(stream: Iterable[Any]) -> List[Dict[str, Any]]:
    """The objects of a YAML stream, with the items of a ``v1 List`` taken out (as kubectl does)."""
    objects: List[Dict[str, Any]] = []
    for doc in stream:
        if isinstance(doc, dict) and doc.get("kind") == "List":
            objects.extend(item for item in doc.get("items") or [] if item)
        elif doc:
            objects.append(doc)
    return objects


def apply(lab_dir: str, objects: Iterable[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """Create each object (RBAC objects, Namespaces, ServiceAccounts), replacing it if it exists."""
    results = []
    for obj in objects:
        if not obj:
            continue
        if obj.get("kind") not in PATHS:
            raise ValueError("access.apply handles %s, not %r" % (", ".join(PATHS), obj.get("kind")))
        answer = admin_request(lab_dir, "POST", _object_path(obj, False), obj)
        if answer["_code"] == 409 and obj["kind"] not in ("Namespace", "ServiceAccount"):
            answer = admin_request(lab_dir, "PUT", _object_path(obj, True), obj)
        if answer["_code"] >= 400 and answer["_code"] != 409:
            raise RuntimeError("%s %s: %s" % (obj["kind"], obj["metadata"]["name"],
                                              answer.get("message")))
        results.append(answer)
    return results


def delete(lab_dir: str, obj: Dict[str, Any]) -> None:
    admin_request(lab_dir, "DELETE", _object_path(obj, True))


def service_account_kubeconfig(lab_dir: str, namespace: str, name: str, path: str) -> str:
    """Write a kubeconfig for ServiceAccount namespace/name at `path`; returns its user name."""
    apply(lab_dir, [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
                    {"apiVersion": "v1", "kind": "ServiceAccount",
                     "metadata": {"name": name, "namespace": namespace}}])
    minted = _faults.lab_call(lab_dir, "POST", "/lab/tokens",
                              {"namespace": namespace, "serviceAccount": name})
    info = _info(lab_dir)
    write_kubeconfig(path, info["url"], minted["token"], info["ca_file"], user=minted["user"])
    return minted["user"]


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gpulab.cluster.access",
                                     description="Write a kubeconfig for a lab ServiceAccount.")
    parser.add_argument("--dir", required=True, help="lab directory (cluster.json)")
    parser.add_argument("--service-account", required=True, metavar="NS/NAME")
    parser.add_argument("--kubeconfig", required=True, help="where to write the kubeconfig")
    parser.add_argument("--apply", action="append", default=[], metavar="FILE",
                        help="YAML file of RBAC objects to create first (repeatable)")
    args = parser.parse_args(argv)
    namespace, _sep, name = args.service_account.partition("/")
    if not namespace or not name:
        parser.error("--service-account must be NAMESPACE/NAME")
    for path in args.apply:
        with open(path, encoding="utf-8") as handle:
            apply(args.dir, documents(yaml.safe_load_all(handle)))
    user = service_account_kubeconfig(args.dir, namespace, name, args.kubeconfig)
    print("%s: kubeconfig for %s" % (args.kubeconfig, user))
    return 0


if __name__ == "__main__":
    sys.exit(main())


__all__ = ["admin_request", "apply", "create_namespaces", "delete", "service_account_kubeconfig"]
