# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The cluster side of gpu_claim_templates: the DRA devices of the fleet plan, the live objects, the writes.

Writes go through ``K8sClient`` (server-side dry runs in check mode). An object the plan names that exists
without ``app.kubernetes.io/managed-by=gpufleet.sharing`` is refused by name before anything is written;
the owned ones the plan no longer names are deleted (templates first, then DeviceClasses). A template
whose spec must change is deleted and created again (``recreate``: its spec is immutable).
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._apply import object_key, replacement, unlisted
from ansible_collections.gpufleet.sharing.plugins.module_utils.fleet._dra_plan import plan_devices
from ansible_collections.gpufleet.sharing.plugins.module_utils.fleet._fleet_read import planned_fleet
from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._api_errors import K8sError
from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._resources import label_selector
from ansible_collections.gpufleet.sharing.plugins.module_utils.proof._dra_verify import slice_checks
from ansible_collections.gpufleet.sharing.plugins.module_utils.proof._verify import Check
from ansible_collections.gpufleet.sharing.plugins.module_utils.sharing._dra_claims import OWNER_KEY, OWNER_VALUE, PlannedDevice

KINDS = ("DeviceClass", "ResourceClaimTemplate")
IMMUTABLE_SPEC = ("ResourceClaimTemplate",)  # re-created, not replaced (``recreate``)
Owned = Dict[str, Dict[Tuple[str, str], Dict[str, Any]]]


def dra_devices(mod: Any, nodes: Sequence[str]) -> Tuple[Dict[str, List[PlannedDevice]], List[str]]:
    """The fleet plan's devices of the DRA nodes (``nodes``; empty: every planned node) and the problems."""
    read, fleet = planned_fleet(mod)
    return plan_devices(fleet, read.plans, nodes)


def read_owned(mod: Any) -> Owned:
    """kind -> (namespace, name) -> every owned DeviceClass and ResourceClaimTemplate."""
    selector = label_selector({OWNER_KEY: OWNER_VALUE})
    try:
        return {kind: {object_key(o): o for o in mod.k8s.list(kind, label_selector=selector)} for kind in KINDS}
    except K8sError as exc:
        if exc.status != 404:
            raise
        mod.fail("resource.k8s.io/v1 is not served by this cluster (Kubernetes 1.34 or later serves it): "
                 "no claim templates without DRA; nothing was written")


def contains(want: Any, have: Any) -> bool:
    """``have`` holds everything ``want`` says (the API server may add defaults; quantities compare as text)."""
    if isinstance(want, Mapping):
        return isinstance(have, Mapping) and all(contains(v, have.get(k)) for k, v in want.items())
    if isinstance(want, list):
        return isinstance(have, list) and len(want) == len(have) and all(contains(w, h) for w, h in zip(want, have))
    return str(want) == str(have)


def _what(body: Mapping[str, Any]) -> str:
    meta = body["metadata"]
    return "%s %s%s" % (body["kind"], meta.get("namespace", "") and meta["namespace"] + "/", meta["name"])


def refusals(mod: Any, bodies: Sequence[Dict[str, Any]], owned: Owned) -> List[str]:
    """The planned objects that exist and are not ours; the namespaces that do not exist.

    An object listed in ``owned`` (this run's read, by our label) is ours and its namespace exists:
    only the others are read, so a converged run reads none."""
    problems = []
    bodies = unlisted(bodies, owned)
    missing = sorted({b["metadata"]["namespace"] for b in bodies if b["metadata"].get("namespace")
                      and mod.k8s.get("Namespace", b["metadata"]["namespace"]) is None})
    problems += ["namespace %s does not exist (create it first; the claim templates go there)" % ns for ns in missing]
    for body in bodies:
        meta = body["metadata"]
        if meta.get("namespace") in missing:
            continue
        live = mod.k8s.get(body["kind"], meta["name"], meta.get("namespace"))
        if live is not None and ((live.get("metadata") or {}).get("labels") or {}).get(OWNER_KEY) != OWNER_VALUE:
            problems.append("%s exists and is not managed by gpufleet.sharing (label %s=%s); it is left alone: "
                            "remove or rename it" % (_what(body), OWNER_KEY, OWNER_VALUE))
    return problems


def write(mod: Any, body: Dict[str, Any], live: Optional[Dict[str, Any]]) -> bool:
    """Create; or when its spec differs, replace a DeviceClass and re-create a template (``recreate``).
    The diff is the spec. True when it changed."""
    if live is not None and contains(body["spec"], live.get("spec")):
        return False
    what = _what(body)
    if live is None:
        mod.k8s.create(body)
    elif body["kind"] in IMMUTABLE_SPEC:
        recreate(mod, body)
        what += " (deleted and created again: its spec is immutable; claims already made from it keep theirs)"
    else:
        mod.k8s.replace(replacement(live, body["spec"], body["metadata"]["labels"]))
    return mod.changes.record(what, (live or {}).get("spec"), body["spec"], changed=True)


def recreate(mod: Any, body: Dict[str, Any]) -> None:
    """A ResourceClaimTemplate whose spec must change is deleted and created again under its name.

    Its spec is immutable (kubernetes pkg/apis/resource/validation ``ValidateResourceClaimTemplateUpdate``:
    ``ValidateImmutableField`` on ``spec``, 422 "field is immutable"), and pods name it, so the name stays.
    What Kubernetes does around it (pkg/controller/resourceclaim/controller.go ``handleClaim``): a claim
    already made from the template is the pod's own object (a controller ownerReference to the pod) and is
    never read against the template again, so running pods keep their devices; a pod whose claim the
    controller makes between the delete and the create gets an error that is retried until the template
    exists again, then the new spec. In check mode the delete is a server-side dry run and the create is
    not sent (its dry run would be refused with 409: the object still exists); the diff shows the change."""
    meta = body["metadata"]
    mod.k8s.delete(body["kind"], meta["name"], meta["namespace"])
    if not mod.check_mode:
        mod.k8s.create(body)
    mod.result.setdefault("replaced", []).append("%s/%s" % (meta["namespace"], meta["name"]))


def apply_all(mod: Any, owned: Owned, bodies: Sequence[Dict[str, Any]]) -> None:
    """DeviceClasses, then templates; then the owned ones no longer planned: templates, then classes."""
    for body in bodies:
        meta = body["metadata"]
        write(mod, body, owned[body["kind"]].get((meta.get("namespace", ""), meta["name"])))
    keep = {(b["kind"], b["metadata"].get("namespace", ""), b["metadata"]["name"]) for b in bodies}
    for kind in reversed(KINDS):
        for (namespace, name), obj in sorted(owned[kind].items()):
            if (kind, namespace, name) not in keep:
                mod.k8s.delete(kind, name, namespace or None)
                mod.changes.record("%s %s%s" % (kind, namespace and namespace + "/", name), obj.get("spec"), None,
                                   changed=True)


def dra_node_checks(k8s: Any, fleet: Any, hosts: Mapping[str, Any], nodes: Sequence[str]
                    ) -> Tuple[List[Check], Dict[str, List[PlannedDevice]]]:
    """gpu_verify under DRA: per DRA node its ResourceSlices against the planned devices (one slice list),
    a node without a plan as a failed row; and the devices, for the claim-bound pods."""
    devices, problems = plan_devices(fleet, hosts, nodes)
    checks = [Check(p.split(":", 1)[0].replace("node ", ""), "plan", "dra devices", "computable", "error", False, p)
              for p in problems]
    if not devices:
        return checks, devices
    try:
        slices = k8s.list("ResourceSlice")
    except K8sError as exc:
        if exc.status != 404:
            raise
        slices = []
        checks.append(Check("(cluster)", "slice", "resource.k8s.io/v1", "served", "not served", False,
                            "the cluster does not serve resource.k8s.io/v1 ResourceSlices (Kubernetes 1.34 or later)"))
    for node in sorted(devices):
        checks.extend(slice_checks(node, devices[node], slices))
    return checks, devices
