"""_dra_claims / _dra_objects: device kinds from the plan, the DeviceClasses and claim templates users
name, the Kueue deviceClassMappings; the CEL selectors are evaluated with a real CEL library."""

from __future__ import annotations

import re

import pytest

from ansible_collections.gpufleet.sharing.plugins.module_utils.fleet._dra_plan import plan_devices
from ansible_collections.gpufleet.sharing.plugins.module_utils.gpu._mig_catalog import MODELS
from ansible_collections.gpufleet.sharing.plugins.module_utils.sharing._dra_claims import (
    DeviceKind, TemplateRequest, fleet_kinds, gate_problems, gpu_kind, kind_capacity, mig_kind, node_devices,
    parse_requests)
from ansible_collections.gpufleet.sharing.plugins.module_utils.sharing._dra_objects import (
    claim_template, device_class, device_class_mappings, mapping_problems, plan_objects, with_mappings)
from ansible_collections.gpufleet.sharing.plugins.module_utils.fleet._fleet_plan import (
    SCOPE_FLEET, ClusterView, HostPlan, Intent, plan_fleet)

H100 = "NVIDIA H100 80GB HBM3"
MIG_GPUS = [{"model": "H100-80GB", "count": 2, "mig": {"1g.10gb": 7}}]
FULL_GPUS = [{"model": "H100-80GB", "count": 2}]


def device(kind, profile=None, product=H100, parent="GPU-0"):
    """A device as the driver's kubelet plugin publishes it (attribute names of v0.4.1)."""
    attrs = {"type": {"string": kind}, "productName": {"string": product}}
    if profile:
        attrs.update(profile={"string": profile}, parentUUID={"string": parent})
    return {"driver": "gpu.nvidia.com", "attributes": {"gpu.nvidia.com": {k: list(v.values())[0] for k, v in attrs.items()}}}


def cel_true(expression, dev):
    celpy = pytest.importorskip("celpy")
    env = celpy.Environment()
    program = env.program(env.compile(expression))
    return bool(program.evaluate({"device": celpy.json_to_cel(dev)}))


def test_kinds_are_named_after_the_profile_and_the_product():
    assert mig_kind("1g.10gb").name == "mig-1g-10gb"
    assert mig_kind("1g.10gb+me").name == "mig-1g-10gb-me"
    assert gpu_kind(H100).name == "gpu-nvidia-h100-80gb-hbm3"
    assert gpu_kind(H100, "mps").name == "gpu-nvidia-h100-80gb-hbm3-mps"
    assert mig_kind("1g.10gb").resource == "nvidia.com/mig-1g.10gb"
    assert gpu_kind(H100).resource == "nvidia.com/gpu"
    assert mig_kind("1g.10gb").device_class == "mig-1g-10gb.gpufleet.sharing"


def test_selectors_select_exactly_their_devices_with_a_real_cel():
    mig = mig_kind("1g.10gb").selector()
    assert mig == ("device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig' && "
                   "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'")
    assert cel_true(mig, device("mig", "1g.10gb"))
    assert not cel_true(mig, device("mig", "2g.20gb"))
    assert not cel_true(mig, device("gpu"))
    full = gpu_kind(H100).selector()
    assert cel_true(full, device("gpu"))
    assert not cel_true(full, device("gpu", product="NVIDIA A100-SXM4-40GB"))
    assert not cel_true(full, device("mig", "1g.10gb"))


def test_node_devices_per_gpu_with_parents_and_uuids():
    facts = [{"index": 0, "uuid": "GPU-a"}, {"index": 1, "uuid": "GPU-b"}]
    devices = node_devices("n1", MIG_GPUS, facts)
    assert len(devices) == 14
    assert {d.parent for d in devices} == {"GPU-a", "GPU-b"}
    assert {d.kind.name for d in devices} == {"mig-1g-10gb"}
    mixed = node_devices("n2", [{"model": "H100-80GB", "mig": {"3g.40gb": 1, "1g.10gb": 2}}, {"model": "H100-80GB"}])
    assert [(d.gpu, d.kind.name, d.parent) for d in mixed] == [
        (0, "mig-1g-10gb", "gpu-0"), (0, "mig-1g-10gb", "gpu-0"), (0, "mig-3g-40gb", "gpu-0"),
        (1, "gpu-nvidia-h100-80gb-hbm3", "gpu-1")]


def test_a_shared_node_gets_a_shared_kind_and_needs_its_alpha_gate():
    devices = node_devices("n1", FULL_GPUS, sharing="time-slicing")
    kinds = {d.kind.name: d.kind for d in devices}
    assert list(kinds) == ["gpu-nvidia-h100-80gb-hbm3-time-slicing"]
    problems = gate_problems(kinds, {})
    assert len(problems) == 1 and "TimeSlicingSettings" in problems[0] and "time-slicing" in problems[0]
    assert gate_problems(kinds, {"TimeSlicingSettings": True}) == []
    template = claim_template(kinds["gpu-nvidia-h100-80gb-hbm3-time-slicing"], "team-a")
    config = template["spec"]["spec"]["devices"]["config"][0]
    assert config["requests"] == ["gpu"]
    assert config["opaque"]["parameters"] == {"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig",
                                              "sharing": {"strategy": "TimeSlicing"}}


def test_claim_template_shape_is_resource_k8s_io_v1():
    template = claim_template(mig_kind("1g.10gb"), "vision", 2)
    assert template["apiVersion"] == "resource.k8s.io/v1" and template["kind"] == "ResourceClaimTemplate"
    assert template["metadata"]["name"] == "mig-1g-10gb" and template["metadata"]["namespace"] == "vision"
    assert template["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "gpufleet.sharing"
    request = template["spec"]["spec"]["devices"]["requests"][0]
    assert request["name"] == "gpu"
    assert request["exactly"]["deviceClassName"] == "mig-1g-10gb.gpufleet.sharing"
    assert request["exactly"]["count"] == 2 and request["exactly"]["allocationMode"] == "ExactCount"
    assert "config" not in template["spec"]["spec"]["devices"]
    cls = device_class(mig_kind("1g.10gb"))
    assert cls["spec"]["selectors"][0]["cel"]["expression"] == mig_kind("1g.10gb").selector()


def test_plan_objects_every_kind_or_the_named_ones():
    kinds = {k.name: k for k in (mig_kind("1g.10gb"), gpu_kind(H100))}
    classes, templates, problems = plan_objects([TemplateRequest(("a", "b"))], kinds)
    assert problems == []
    assert [c["metadata"]["name"] for c in classes] == ["gpu-nvidia-h100-80gb-hbm3.gpufleet.sharing", "mig-1g-10gb.gpufleet.sharing"]
    assert [(t["metadata"]["namespace"], t["metadata"]["name"]) for t in templates] == [
        ("a", "gpu-nvidia-h100-80gb-hbm3"), ("a", "mig-1g-10gb"), ("b", "gpu-nvidia-h100-80gb-hbm3"), ("b", "mig-1g-10gb")]
    classes, templates, problems = plan_objects([TemplateRequest(("a",), ("1g.10gb",))], kinds)
    assert [t["metadata"]["name"] for t in templates] == ["mig-1g-10gb"] and len(classes) == 2  # a class per planned kind


def test_a_template_for_a_profile_the_plan_does_not_have_is_refused_by_name():
    kinds = {"mig-1g-10gb": mig_kind("1g.10gb")}
    _classes, _templates, problems = plan_objects([TemplateRequest(("a",), ("2g.20gb",))], kinds)
    assert problems == ["claim_templates[0]: '2g.20gb' is not a device kind of the plan (the planned nodes have: mig-1g-10gb)"]


def test_parse_requests_names_each_bad_entry():
    requests, problems = parse_requests([{"namespaces": ["ok"], "kinds": ["1g.10gb"], "count": 2},
                                         {"namespaces": "team"}, {"namespaces": ["Bad_NS"], "count": 0, "extra": 1}])
    assert requests[0] == TemplateRequest(("ok",), ("1g.10gb",), 2)
    assert "claim_templates[1]: namespaces must be a non-empty list" in problems[0]
    assert any("claim_templates[2]: namespace 'Bad_NS' is not a DNS label" in p for p in problems)
    assert any("claim_templates[2]: count must be" in p for p in problems)
    assert any("claim_templates[2]: unknown key extra" in p for p in problems)


def test_plan_devices_from_the_fleet_plan_and_capacity_per_resource():
    hosts = {"m": HostPlan("m", gpus=tuple(MIG_GPUS)), "f": HostPlan("f", gpus=tuple(FULL_GPUS)), "x": HostPlan("x")}
    cluster = ClusterView.read([{"metadata": {"name": n, "labels": {}}} for n in ("m", "f", "x")], None)
    fleet = plan_fleet(Intent(hosts=hosts, scope=SCOPE_FLEET), cluster)
    devices, problems = plan_devices(fleet, hosts, ["m", "f", "x"])
    assert problems == ["node x: no GPU plan (node_plans gpus or gpu_facts): the DRA devices it must publish cannot be planned"]
    assert kind_capacity(devices) == {"f": {"nvidia.com/gpu": 2}, "m": {"nvidia.com/mig-1g.10gb": 14}}
    assert sorted(fleet_kinds(devices)) == ["gpu-nvidia-h100-80gb-hbm3", "mig-1g-10gb"]


def test_kueue_device_class_mappings_charge_each_class_to_the_device_plugin_resource():
    kinds = [mig_kind("1g.10gb"), gpu_kind(H100), gpu_kind("NVIDIA A100-SXM4-40GB")]
    mappings = device_class_mappings(kinds)
    assert mappings == [
        {"name": "nvidia.com/gpu", "deviceClassNames": ["gpu-nvidia-a100-sxm4-40gb.gpufleet.sharing",
                                                        "gpu-nvidia-h100-80gb-hbm3.gpufleet.sharing"]},
        {"name": "nvidia.com/mig-1g.10gb", "deviceClassNames": ["mig-1g-10gb.gpufleet.sharing"]}]
    assert mapping_problems(mappings) == []
    many = device_class_mappings([gpu_kind("P%d" % i) for i in range(9)])
    assert mapping_problems(many) == ["Kueue deviceClassMappings: resource nvidia.com/gpu has 9 DeviceClasses, Kueue allows 8"]
    config = with_mappings({"apiVersion": "config.kueue.x-k8s.io/v1beta2", "resources": {"excludeResourcePrefixes": ["x"]}},
                           mappings)
    assert config["resources"]["excludeResourcePrefixes"] == ["x"] and config["resources"]["deviceClassMappings"] == mappings
    assert "resources" not in with_mappings({"resources": {"deviceClassMappings": mappings}}, [])


def test_device_kind_dict_names_everything_a_user_needs():
    assert DeviceKind("mig-1g-10gb", "mig", "1g.10gb").as_dict()["device_class"] == "mig-1g-10gb.gpufleet.sharing"


def test_kueue_refuses_mapping_names_that_are_not_label_keys():
    """Kueue validates each deviceClassNames entry and each name as a label key: a name part of at most 63
    characters (kubernetes-sigs/kueue v0.19.2 pkg/config/validation.go, validateDeviceClassMappings)."""
    long_class = "gpu-" + "x" * 50 + ".gpufleet.sharing"  # 71 characters, no '/': all of it is the name part
    mappings = [{"name": "nvidia.com/gpu", "deviceClassNames": [long_class, "ok.gpufleet.sharing"]},
                {"name": "nvidia.com/mig-1g.10gb+me", "deviceClassNames": ["mig.gpufleet.sharing"]}]
    problems = mapping_problems(mappings)
    assert ("Kueue deviceClassMappings: resource nvidia.com/gpu: DeviceClass %r is not a label key (Kueue refuses "
            "the whole configuration): a name of at most 63 letters, digits, '-', '_' or '.' after an optional "
            "DNS-subdomain prefix and '/'" % long_class) in problems
    assert any("resource 'nvidia.com/mig-1g.10gb+me' is not a label key" in p for p in problems), problems
    assert len(problems) == 2


def _kueue_label_key(name):
    """content.IsLabelKey as Kueue calls it (k8s.io/apimachinery validation.IsQualifiedName), written for the test."""
    prefix, _slash, part = name.rpartition("/")
    prefix_ok = not prefix or (len(prefix) <= 253 and re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*", prefix))
    return bool(prefix_ok) and len(part) <= 63 and bool(re.fullmatch(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]", part))


def test_every_catalog_kind_is_refused_exactly_when_kueue_would():
    """Over every product and MIG profile of the catalog, with every sharing: the mapping is refused before
    anything is written exactly when Kueue's manager would refuse it (never handed to Kueue to fail on)."""
    kinds = [mig_kind(p.name) for m in MODELS for p in m.profiles]
    kinds += [gpu_kind(product, sharing) for m in MODELS for product in m.product_names
              for sharing in (None, "time-slicing", "mps")]
    for kind in kinds:
        refused = bool(mapping_problems(device_class_mappings([kind])))
        assert refused == (not _kueue_label_key(kind.device_class) or not _kueue_label_key(kind.resource)), kind
