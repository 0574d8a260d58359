"""The lab's Kueue CRDs (gpulab.cluster.kueue): served, and validated as Kueue v0.19.2 declares."""

from __future__ import annotations

import copy

import pytest

from gpulab.cluster import kueue
from gpulab.cluster.errors import ApiError
from gpulab.cluster.store import Store

CQ = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "team-a"},
      "spec": {"cohortName": "research", "namespaceSelector": {},
               "resourceGroups": [{"coveredResources": ["nvidia.com/mig-1g.10gb"],
                                   "flavors": [{"name": "h100-mig", "resources": [
                                       {"name": "nvidia.com/mig-1g.10gb", "nominalQuota": 7,
                                        "borrowingLimit": "2", "lendingLimit": 3}]}]}]}}


@pytest.fixture(name="store")
def _store():
    store = Store()
    kueue.install(store)
    return store


def _invalid(store, key, obj, old=None):
    with pytest.raises(ApiError) as err:
        if old is None:
            store.create(key, obj)
        else:
            store.create(key, old)
            current = store.get(key, None, old["metadata"]["name"]) if "namespace" not in old["metadata"] \
                else store.get(key, old["metadata"]["namespace"], old["metadata"]["name"])
            obj = copy.deepcopy(obj)
            obj["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
            store.update(key, obj)
    assert err.value.code == 422
    return str(err.value)


def test_valid_objects_are_stored(store):
    store.create(kueue.RF_KEY, {"metadata": {"name": "h100-mig"}, "spec": {
        "nodeLabels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb"},
        "nodeTaints": [{"key": "gpu", "value": "h100", "effect": "NoSchedule"}],
        "tolerations": [{"key": "gpu", "operator": "Equal", "value": "h100", "effect": "NoSchedule"}]}})
    stored = store.create(kueue.CQ_KEY, copy.deepcopy(CQ))
    assert stored["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] == 7
    store.create("v1/namespaces", {"metadata": {"name": "ml"}})
    store.create(kueue.LQ_KEY, {"metadata": {"name": "team-a", "namespace": "ml"}, "spec": {"clusterQueue": "team-a"}})


def _cq(**changes):
    obj = copy.deepcopy(CQ)
    res = obj["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]
    for key, value in changes.items():
        if key == "cohortName":
            obj["spec"].pop("cohortName") if value is None else obj["spec"].__setitem__(key, value)
        elif value is None:
            res.pop(key)
        else:
            res[key] = value
    return obj


@pytest.mark.parametrize("changes,message", [
    ({"nominalQuota": -1}, "must be greater than or equal to 0"),
    ({"nominalQuota": "seven"}, "nominalQuota"),
    ({"lendingLimit": 8}, "must be less than or equal to the nominalQuota"),
    ({"cohortName": None}, "must be nil when cohort is empty"),
    ({"cohortName": "Not_A_Name"}, "cohortName"),
    ({"name": "nvidia.com/gpu"}, "must match the name in coveredResources"),
])
def test_cluster_queue_rules(store, changes, message):
    assert message in _invalid(store, kueue.CQ_KEY, _cq(**changes))


@pytest.mark.parametrize("name", ["nvidia.com/mig-1g.10gb+me", "nvidia.com/mig 1g", "Bad.Prefix/x", "nvidia.com/" + "m" * 64])
def test_cluster_queue_resource_names_are_label_keys(store, name):
    """Kueue's webhook validates every coveredResources name as a label key (kubernetes-sigs/kueue v0.19.2
    pkg/webhooks/common.go validateResourceName, content.IsLabelKey): a '+' is refused (issue 42)."""
    obj = copy.deepcopy(CQ)
    group = obj["spec"]["resourceGroups"][0]
    group["coveredResources"] = [name]
    group["flavors"][0]["resources"][0]["name"] = name
    assert "spec.resourceGroups[0].coveredResources[0]: Invalid value: %r" % name in _invalid(store, kueue.CQ_KEY, obj)
    group["coveredResources"] = ["nvidia.com/mig-1g.10gb.me"]
    group["flavors"][0]["resources"][0]["name"] = "nvidia.com/mig-1g.10gb.me"
    store.create(kueue.CQ_KEY, obj)


def test_cluster_queue_group_rules(store):
    obj = copy.deepcopy(CQ)
    group = obj["spec"]["resourceGroups"][0]
    group["flavors"][0]["resources"].append({"name": "x", "nominalQuota": 1})
    assert "same number of resources as the coveredResources" in _invalid(store, kueue.CQ_KEY, obj)
    obj = copy.deepcopy(CQ)
    obj["spec"]["resourceGroups"].append(copy.deepcopy(CQ["spec"]["resourceGroups"][0]))
    assert "Duplicate value" in _invalid(store, kueue.CQ_KEY, obj)
    obj = copy.deepcopy(CQ)
    obj["spec"]["resourceGroups"] = [copy.deepcopy(CQ["spec"]["resourceGroups"][0]) for _group in range(17)]
    assert "must have at most 16 items" in _invalid(store, kueue.CQ_KEY, obj)


@pytest.mark.parametrize("spec,message", [
    ({"nodeTaints": [{"key": "a", "effect": "Sometimes"}]}, "supported taint effect values"),
    ({"nodeTaints": [{"effect": "NoSchedule"}]}, "key"),
    ({"tolerations": [{"operator": "Equal", "value": "x"}]}, "operator must be Exists"),
    ({"tolerations": [{"key": "a", "operator": "Exists", "value": "x"}]}, "a value must be empty"),
    ({"tolerations": [{"key": "a", "effect": "NoSchedule", "tolerationSeconds": 3}]}, "'NoExecute'"),
    ({"nodeLabels": {"l%d" % i: "v" for i in range(9)}}, "nodeLabels"),
    # Kueue's webhook (kubernetes-sigs/kueue v0.19.2 pkg/webhooks/resourceflavor_webhook.go, ValidateResourceFlavor):
    # nodeLabels as metav1 ValidateLabels, nodeTaints as the core validateNodeTaints (issue 42)
    ({"nodeLabels": {"bad key!": "v"}}, "spec.nodeLabels: Invalid value: 'bad key!': name part must consist"),
    ({"nodeLabels": {"nvidia.com/gpu.product": "NVIDIA H100"}}, "spec.nodeLabels: Invalid value: 'NVIDIA H100': a valid label"),
    ({"nodeLabels": {"k": "v" * 64}}, "a valid label must be"),
    ({"nodeTaints": [{"key": "gpu", "value": "a", "effect": "NoSchedule"}, {"key": "gpu", "value": "b", "effect": "NoSchedule"}]},
     "spec.nodeTaints[1]: Duplicate value"),
    ({"nodeTaints": [{"key": "bad key", "effect": "NoSchedule"}]}, "spec.nodeTaints[0].key: Invalid value: 'bad key'"),
    ({"nodeTaints": [{"key": "k", "value": "a b", "effect": "NoSchedule"}]}, "spec.nodeTaints[0].value: Invalid value: 'a b'"),
])
def test_resource_flavor_rules(store, spec, message):
    assert message in _invalid(store, kueue.RF_KEY, {"metadata": {"name": "f"}, "spec": spec})


def test_local_queue_cluster_queue_is_immutable(store):
    store.create("v1/namespaces", {"metadata": {"name": "ml"}})
    old = {"metadata": {"name": "q", "namespace": "ml"}, "spec": {"clusterQueue": "a"}}
    new = {"metadata": {"name": "q", "namespace": "ml"}, "spec": {"clusterQueue": "b"}}
    assert "field is immutable" in _invalid(store, kueue.LQ_KEY, new, old)


@pytest.mark.parametrize("text,value", [("7", 7), ("1k", 1000), ("2Ki", 2048), ("500m", 0.5), ("1e3", 1000)])
def test_quantity(text, value):
    assert kueue.quantity(text) == pytest.approx(value)
    assert kueue.quantity("x7") is None
