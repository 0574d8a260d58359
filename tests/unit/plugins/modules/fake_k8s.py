# -*- coding: utf-8 -*-
"""A small in-memory stand-in for _k8s.K8sClient, for module unit tests (the lab tests use the real API).

It records every write so tests can prove that check mode and bad input change nothing: ``writes``
holds the writes that were stored, ``dry_writes`` those sent as dry runs (the client's ``dry_run``,
set by ``run(..., check_mode=True)``, or the call's own ``dry_run``), which store nothing.
"""

from __future__ import annotations

import copy
import json

import pytest

from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s import _cluster_module
from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._apply import ApplyResult
from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._api_errors import K8sError, K8sTimeout

import callback_diff  # the test directory is on sys.path, as for fake_k8s itself


# kubernetes pkg/apis/resource/validation: ValidateResourceClaimUpdate / ValidateResourceClaimTemplateUpdate
IMMUTABLE_SPEC = ("ResourceClaim", "ResourceClaimTemplate")


class FakeK8s:
    def __init__(self):
        self.objects = {}  # (kind, namespace, name) -> obj
        self.writes = []
        self.dry_writes = []
        self.dry_run = False
        self.logs = {}
        self.request_count = 0
        self.request_timeout = 30
        self.pod_behaviour = None  # callable(pod) -> (phase, log) run when a pod is created
        self.events = []
        self.time = 0.0

    # helpers for tests
    def add(self, kind, name, namespace=None, **fields):
        obj = {"kind": kind, "metadata": {"name": name}}
        if namespace:
            obj["metadata"]["namespace"] = namespace
        obj.update(copy.deepcopy(fields))
        self.objects[(kind, namespace, name)] = obj
        return obj

    def obj(self, kind, name, namespace=None):
        return self.objects.get((kind, namespace, name))

    def now(self):
        return self.time

    def pod_log(self, name, namespace, container=None, tail_lines=None):
        self.request_count += 1
        return self.logs.get(name, "")

    def _write(self, entry, dry_run):
        """Record one write; True when it is a dry run (and must store nothing)."""
        dry = self.dry_run if dry_run is None else bool(dry_run)
        (self.dry_writes if dry else self.writes).append(entry)
        return dry

    # the client API used by the modules
    def get(self, kind, name, namespace=None):
        self.request_count += 1
        found = self.objects.get((kind, namespace, name))
        return copy.deepcopy(found)

    def list(self, kind, namespace=None, label_selector=None, field_selector=None):
        self.request_count += 1
        wanted = {}
        for term in (label_selector or "").split(","):
            if "=" in term:
                key, _sep, value = term.partition("=")
                wanted[key] = value
        items = []
        for (k, ns, _name), obj in sorted(self.objects.items(), key=lambda item: str(item[0])):
            if k != kind or (namespace is not None and ns != namespace):
                continue
            labels = obj["metadata"].get("labels") or {}
            if all(labels.get(key) == value for key, value in wanted.items()):
                items.append(copy.deepcopy(obj))
        if kind == "Event":
            items = [copy.deepcopy(e) for e in self.events]
        return items

    def apply(self, body, dry_run=None, compare="exact"):
        self.request_count += 1
        dry = self._write(("apply", body["kind"], body["metadata"]["name"]), dry_run)
        key = (body["kind"], body["metadata"].get("namespace"), body["metadata"]["name"])
        before = self.objects.get(key)
        if not dry:
            self.objects[key] = copy.deepcopy(body)
        return ApplyResult("updated" if before else "created", before, body)

    def patch(self, kind, name, patch, namespace=None, patch_type="merge", dry_run=None):
        self.request_count += 1
        dry = self._write(("patch", kind, name, json.dumps(patch, sort_keys=True)), dry_run)
        obj = self.objects[(kind, namespace, name)]
        if dry:
            obj = copy.deepcopy(obj)

        def merge(target, change):
            for key, value in change.items():
                if isinstance(value, dict):
                    merge(target.setdefault(key, {}), value)
                else:
                    target[key] = value
        merge(obj, patch)
        return obj

    def set_node_labels(self, node, labels, dry_run=None):
        self.request_count += 2
        dry = self._write(("labels", node, json.dumps(labels, sort_keys=True)), dry_run)
        obj = self.objects[("Node", None, node)]
        if dry:
            obj = copy.deepcopy(obj)
        obj["metadata"].setdefault("labels", {}).update(labels)
        return True, obj

    def set_node_annotations(self, node, annotations, dry_run=None):
        self.request_count += 2
        dry = self._write(("annotations", node, json.dumps(annotations, sort_keys=True)), dry_run)
        obj = self.objects[("Node", None, node)]
        if dry:
            obj = copy.deepcopy(obj)
        current = obj["metadata"].setdefault("annotations", {})
        for key, value in annotations.items():
            if value is None:
                current.pop(key, None)
            else:
                current[key] = value
        return True, obj

    def delete(self, kind, name, namespace=None, dry_run=None, grace_period_seconds=None):
        self.request_count += 1
        if self._write(("delete", kind, name), dry_run):
            return (kind, namespace, name) in self.objects
        return self.objects.pop((kind, namespace, name), None) is not None

    def create(self, body, dry_run=None, namespace=None):
        self.request_count += 1
        if self._write(("create", body["kind"], body["metadata"]["name"]), dry_run):
            return copy.deepcopy(body)
        obj = copy.deepcopy(body)
        if self.pod_behaviour is not None and body["kind"] == "Pod":
            phase, log = self.pod_behaviour(obj)
            obj["status"] = {"phase": phase}
            self.logs[obj["metadata"]["name"]] = log
        self.objects[(body["kind"], body["metadata"].get("namespace"), body["metadata"]["name"])] = obj
        return obj

    def replace(self, body, dry_run=None):
        self.request_count += 1
        key = (body["kind"], body["metadata"].get("namespace"), body["metadata"]["name"])
        if key not in self.objects:
            raise K8sError("%s %s not found" % (body["kind"], body["metadata"]["name"]), status=404)
        if body["kind"] in IMMUTABLE_SPEC and body.get("spec") != self.objects[key].get("spec"):
            raise K8sError("%s %s: spec: Invalid value: field is immutable" % (body["kind"], body["metadata"]["name"]),
                           status=422)
        if self._write(("replace", body["kind"], body["metadata"]["name"]), dry_run):
            return copy.deepcopy(body)
        self.objects[key] = copy.deepcopy(body)
        return copy.deepcopy(body)

    def update(self, kind, name, mutate, namespace=None, dry_run=None):
        """Read-modify-write as K8sClient.update: (changed, before, after)."""
        live = self.get(kind, name, namespace)
        if live is None:
            raise K8sError("%s %s not found" % (kind, name), status=404)
        wanted = mutate(copy.deepcopy(live))
        if wanted is None:
            return False, live, live
        wanted.setdefault("kind", kind)
        return True, live, self.replace(wanted, dry_run=dry_run)

    def ensure_namespace(self, name, labels=None, dry_run=None):
        if ("Namespace", None, name) in self.objects:
            self.request_count += 1
            return ApplyResult("unchanged", None, None)
        return self.apply({"kind": "Namespace", "metadata": {"name": name, "labels": labels or {}}}, dry_run=dry_run)

    def request(self, method, path, body=None, query=None, content_type=None, retry_429=True):
        self.request_count += 1
        collections = {"/pods": "Pod", "/resourceclaims": "ResourceClaim"}
        if method == "DELETE" and path.endswith(tuple(collections)):
            kind = collections["/" + path.rsplit("/", 1)[1]]
            namespace = path.split("/")[4] if kind == "Pod" else path.split("/")[5]
            selector = dict(q for q in query or [])["labelSelector"]
            wanted = dict(term.split("=", 1) for term in selector.split(","))
            if dict(query or []).get("dryRun") == "All":
                return {}
            for key in [k for k, o in self.objects.items() if k[0] == kind and k[1] == namespace
                        and all((o["metadata"].get("labels") or {}).get(a) == b for a, b in wanted.items())]:
                self.writes.append(("delete", kind, key[2]))
                del self.objects[key]
            return {}
        raise K8sError("unexpected request %s %s" % (method, path))

    def wait_for(self, what, probe, timeout, interval=2.0, progress=None):
        while True:
            done, detail = probe()
            if done:
                return detail
            if progress is not None:
                progress(what, self.time, detail)
            if self.time >= timeout:
                raise K8sTimeout(what, self.time, detail)
            self.time += interval


class ModuleExit(Exception):
    def __init__(self, result, failed):
        super().__init__(result.get("msg"))
        self.result = result
        self.failed = failed


def run(module, args, fake, monkeypatch, check_mode=False, diff=False):
    """Run ``module.main()`` in-process against ``fake``; returns (result, failed).

    The fake stands in for the client whether the module builds it itself (``client_from_module``)
    or gets it from the module base (``ClusterModule.k8s``, dry run in check mode)."""
    def connect(_module, dry_run=False, **_options):
        fake.dry_run = dry_run
        return fake
    if hasattr(module, "client_from_module"):
        monkeypatch.setattr(module, "client_from_module", connect)
    monkeypatch.setattr(_cluster_module, "client_from_module", connect)

    def exit_json(self, **kwargs):
        raise ModuleExit(kwargs, False)

    def fail_json(self, msg, **kwargs):
        kwargs["msg"] = msg
        raise ModuleExit(kwargs, True)

    monkeypatch.setattr(basic.AnsibleModule, "exit_json", exit_json)
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", fail_json)
    payload = dict(args, _ansible_check_mode=check_mode, _ansible_diff=diff)
    with patch_module_args(payload):
        with pytest.raises(ModuleExit) as info:
            module.main()
    if "diff" in info.value.result:
        callback_diff.render(info.value.result["diff"])  # every diff a test asks for must print (issue 43 #7)
    return info.value.result, info.value.failed
