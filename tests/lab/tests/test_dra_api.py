"""resource.k8s.io/v1 on the lab's HTTPS API server, through the `kubernetes` client and kubectl:
discovery, scope, validation refusals (kubernetes pkg/apis/resource/validation), dry run, the
claim status subresource, and a simulated Kubernetes < 1.34 that does not serve the group."""

from __future__ import annotations

import json
import subprocess

import pytest
from kubernetes import client, config, dynamic
from kubernetes.client.rest import ApiException

from gpulab import tools
from gpulab.cluster import faults, server

GPU_CLASS = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu.nvidia.com"},
             "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com' && "
                                                           "device.attributes['gpu.nvidia.com'].type == 'gpu'"}}]}}


def _claim(name, requests, constraints=None):
    devices = {"requests": requests}
    if constraints is not None:
        devices["constraints"] = constraints
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name}, "spec": {"devices": devices}}


def _exact(name="gpu", cls="gpu.nvidia.com", **extra):
    return {"name": name, "exactly": dict({"deviceClassName": cls}, **extra)}


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    running = server.serve_in_thread(str(tmp_path_factory.mktemp("dra-api")), [{"name": "gpu-a"}],
                                     fault_registry=faults.FaultRegistry())
    yield running
    running.stop()


@pytest.fixture(scope="module")
def resource_api(lab):
    return client.ResourceV1Api(config.new_client_from_config(lab.kubeconfig))


def test_discovery_serves_the_four_kinds_with_their_scope(lab, resource_api):
    api_client = resource_api.api_client
    listing = client.ResourceV1Api(api_client).get_api_resources()
    scope = {r.name: r.namespaced for r in listing.resources}
    assert scope == {"deviceclasses": False, "resourceslices": False, "resourceclaims": True,
                     "resourceclaims/status": True, "resourceclaimtemplates": True}
    groups = {g.name: g.preferred_version.group_version for g in client.ApisApi(api_client).get_api_versions().groups}
    assert groups["resource.k8s.io"] == "resource.k8s.io/v1"
    resource_api.create_device_class(GPU_CLASS)
    dyn = dynamic.DynamicClient(api_client)
    claims = dyn.resources.get(api_version="resource.k8s.io/v1", kind="ResourceClaim")
    made = claims.create(body=_claim("dyn", [_exact()]), namespace="default")
    assert made.spec.devices.requests[0].exactly.allocationMode == "ExactCount"
    assert made.spec.devices.requests[0].exactly.count == 1
    assert [c.metadata.name for c in resource_api.list_namespaced_resource_claim("default").items] == ["dyn"]


@pytest.mark.parametrize("body, field", [
    (_claim("bad-name", [_exact(name="GPU")]), "spec.devices.requests[0].name"),
    (_claim("no-class", [_exact(cls="")]), "spec.devices.requests[0].exactly.deviceClassName"),
    (_claim("both", [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"},
                      "firstAvailable": [{"name": "a", "deviceClassName": "gpu.nvidia.com"}]}]), "spec.devices.requests[0]"),
    (_claim("zero", [_exact(count=0)]), "spec.devices.requests[0].exactly.count"),
    (_claim("all-count", [_exact(allocationMode="All", count=2)]), "spec.devices.requests[0].exactly.count"),
    (_claim("mode", [_exact(allocationMode="Some")]), "spec.devices.requests[0].exactly.allocationMode"),
    (_claim("cel", [_exact(selectors=[{"cel": {"expression": "device.attributes['gpu.nvidia.com'].profile =="}}])]),
     "spec.devices.requests[0].exactly.selectors[0].cel.expression"),
    (_claim("dup", [_exact(), _exact()]), "spec.devices.requests[1].name"),
    (_claim("constraint", [_exact()], [{"requests": ["other"], "matchAttribute": "gpu.nvidia.com/parentUUID"}]),
     "spec.devices.constraints[0].requests[0]"),
    (_claim("unqualified", [_exact()], [{"matchAttribute": "parentUUID"}]), "spec.devices.constraints[0].matchAttribute"),
])
def test_invalid_claims_are_refused_with_the_field(resource_api, body, field):
    with pytest.raises(ApiException) as caught:
        resource_api.create_namespaced_resource_claim("default", body)
    assert caught.value.status == 422
    causes = json.loads(caught.value.body)["details"]["causes"]
    assert field in [cause["field"] for cause in causes], causes
    with pytest.raises(ApiException) as missing:
        resource_api.read_namespaced_resource_claim(body["metadata"]["name"], "default")
    assert missing.value.status == 404


def test_invalid_slices_templates_and_classes_are_refused(resource_api):
    device = {"name": "gpu-0", "attributes": {"type": {"string": "gpu", "int": 1}}}
    bad_slice = {"metadata": {"name": "s"}, "spec": {"driver": "gpu.nvidia.com", "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1},
                                                     "nodeName": "gpu-a", "allNodes": True, "devices": [device, device]}}
    with pytest.raises(ApiException) as caught:
        resource_api.create_resource_slice(bad_slice)
    fields = {c["field"] for c in json.loads(caught.value.body)["details"]["causes"]}
    assert {"spec", "spec.devices[0].attributes[type]", "spec.devices[1].name"} <= fields
    with pytest.raises(ApiException) as template:
        resource_api.create_namespaced_resource_claim_template("default", {"metadata": {"name": "t"}, "spec": {"spec": {
            "devices": {"requests": [{"name": "gpu"}]}}}})
    assert template.value.status == 422 and "exactly one of `exactly` or `firstAvailable`" in template.value.body
    with pytest.raises(ApiException) as cls:
        resource_api.create_device_class({"metadata": {"name": "broken"}, "spec": {"selectors": [{"cel": {"expression": "device."}}]}})
    assert cls.value.status == 422


def test_dry_run_and_the_claim_status_subresource(resource_api):
    resource_api.create_namespaced_resource_claim("default", _claim("dry", [_exact()]), dry_run="All")
    with pytest.raises(ApiException):
        resource_api.read_namespaced_resource_claim("dry", "default")
    claim = resource_api.create_namespaced_resource_claim("default", _claim("st", [_exact()]))
    body = resource_api.api_client.sanitize_for_serialization(claim)
    body["status"] = {"reservedFor": [{"resource": "pods", "name": "p", "uid": "1"}]}
    with pytest.raises(ApiException) as refused:
        resource_api.replace_namespaced_resource_claim_status("st", "default", body)
    assert refused.value.status == 422 and "status.reservedFor" in refused.value.body
    allocation = {"devices": {"results": [{"request": "gpu", "driver": "gpu.nvidia.com", "pool": "gpu-a", "device": "gpu-0"}]}}
    body["status"] = {"allocation": allocation}
    stored = resource_api.replace_namespaced_resource_claim_status("st", "default", body)
    assert stored.status.allocation.devices.results[0].device == "gpu-0"
    body = resource_api.api_client.sanitize_for_serialization(stored)
    body["status"]["allocation"]["devices"]["results"][0]["device"] = "gpu-1"
    with pytest.raises(ApiException) as moved:
        resource_api.replace_namespaced_resource_claim_status("st", "default", body)
    assert "status.allocation" in moved.value.body
    body = resource_api.api_client.sanitize_for_serialization(resource_api.read_namespaced_resource_claim("st", "default"))
    body["spec"]["devices"]["requests"][0]["exactly"]["count"] = 2
    with pytest.raises(ApiException) as immutable:
        resource_api.replace_namespaced_resource_claim("st", "default", body)
    assert immutable.value.status == 422 and "field is immutable" in immutable.value.body


def test_kubectl_lists_applies_and_dry_runs(lab, tmp_path):
    binary = tools.ensure_kubectl()

    def kubectl(*args, stdin=None):
        return subprocess.run([binary, "--kubeconfig", lab.kubeconfig, *args], input=stdin, capture_output=True,
                              text=True, timeout=60, check=False)
    template = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                "metadata": {"name": "mig-1g-10gb", "namespace": "default"},
                "spec": {"spec": {"devices": {"requests": [{"name": "mig", "exactly": {
                    "deviceClassName": "mig.nvidia.com",
                    "selectors": [{"cel": {"expression": "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'"}}]}}]}}}}
    dry = kubectl("apply", "--dry-run=server", "-f", "-", stdin=json.dumps(template))
    assert dry.returncode == 0, dry.stderr
    assert kubectl("get", "resourceclaimtemplates", "-o", "name").stdout.strip() == ""
    applied = kubectl("apply", "-f", "-", stdin=json.dumps(template))
    assert applied.returncode == 0, applied.stderr
    assert kubectl("get", "resourceclaimtemplates.resource.k8s.io", "-o", "name").stdout.split() == [
        "resourceclaimtemplate.resource.k8s.io/mig-1g-10gb"]
    assert kubectl("get", "resourceslices").stdout.split()[:5] in ([], ["NAME", "NODE", "DRIVER", "POOL", "AGE"])
    assert kubectl("get", "deviceclasses").returncode == 0
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "table", "namespace": "default"},
             "spec": template["spec"]["spec"]}
    assert kubectl("apply", "-f", "-", stdin=json.dumps(claim)).returncode == 0
    table = kubectl("get", "resourceclaim", "table").stdout.split()
    assert table[:3] == ["NAME", "STATE", "AGE"] and table[4] == "pending"


def test_an_older_kubernetes_does_not_serve_resource_v1(tmp_path, monkeypatch):
    monkeypatch.setenv("GPULAB_KUBERNETES_VERSION", "1.33.5")
    running = server.serve_in_thread(str(tmp_path), [{"name": "gpu-a"}], fault_registry=faults.FaultRegistry())
    try:
        api_client = config.new_client_from_config(running.kubeconfig)
        assert client.VersionApi(api_client).get_code().git_version == "v1.33.5-gpulab"
        groups = [g.name for g in client.ApisApi(api_client).get_api_versions().groups]
        assert "resource.k8s.io" not in groups and "apps" in groups
        with pytest.raises(ApiException) as caught:
            client.ResourceV1Api(api_client).list_device_class()
        assert caught.value.status == 404
    finally:
        running.stop()


def test_a_claim_template_spec_update_is_refused_and_its_labels_may_change(resource_api):
    """Issue 43 #1: as kubernetes pkg/apis/resource/validation ValidateResourceClaimTemplateUpdate
    (ValidateImmutableField on spec): 422, "field is immutable"; metadata may still change."""
    template = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                "metadata": {"name": "one-gpu", "namespace": "default"},
                "spec": {"spec": {"devices": {"requests": [_exact()]}}}}
    made = resource_api.create_namespaced_resource_claim_template("default", template)
    body = resource_api.api_client.sanitize_for_serialization(made)
    body["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"] = 2
    with pytest.raises(ApiException) as immutable:
        resource_api.replace_namespaced_resource_claim_template("one-gpu", "default", body)
    assert immutable.value.status == 422 and "field is immutable" in immutable.value.body
    assert "spec" in json.loads(immutable.value.body)["details"]["causes"][0]["field"]
    body = resource_api.api_client.sanitize_for_serialization(made)
    body["metadata"].setdefault("labels", {})["team"] = "vision"
    relabelled = resource_api.replace_namespaced_resource_claim_template("one-gpu", "default", body)
    assert relabelled.metadata.labels == {"team": "vision"}
    assert relabelled.spec.spec.devices.requests[0].exactly.count == 1
