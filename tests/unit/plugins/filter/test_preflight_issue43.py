"""Issue 43 (3, 4): every input of a run is checked by site.yml's preflight, with the modules' own checks,
before any play changes anything (the preflight is this filter on the controller: it changes nothing)."""

from __future__ import annotations

import os

from ansible_collections.gpufleet.sharing.plugins.filter.preflight_problems import preflight_problems
from ansible_collections.gpufleet.sharing.plugins.filter.variable_problems import variable_problems

SELECTION = {"config": "all-disabled", "configs": {}, "include_defaults": True}
A100 = {"index": 0, "name": "NVIDIA A100-SXM4-40GB", "pci_device_id": "0x20B010DE",
        "mig": {"capable": True, "current": False, "pending": False, "instances": []}}
TS4 = {"name": "ts4", "strategy": "time-slicing", "resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}
MPS4 = {"name": "mps4", "strategy": "mps", "resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}


def host(**values):
    return dict({"mig_selection": SELECTION, "ansible_facts": {"gpufleet_gpus": [A100]}}, **values)


def problems_of(values, name="gpu-a"):
    return preflight_problems({name: dict(values, inventory_hostname=name)}, [name], [])


def test_a_sharing_config_the_module_refuses_is_refused_by_preflight():
    """replicas 0 used to pass preflight and fail at gpu_sharing, after the operator play."""
    config = dict(TS4, resources=[{"name": "nvidia.com/gpu", "replicas": 0}])
    assert problems_of(host(gpu_sharing_config=config)) == [
        "gpu-a: gpu_sharing_config: sharing config 'ts4' resources[0] (nvidia.com/gpu): replicas must be >= 2, got 0"]
    assert problems_of(host(gpu_sharing_config=TS4)) == []


def test_mps_on_a_host_whose_gpus_are_in_mig_mode_is_refused():
    """The device plugin shares only whole GPUs with MPS (docs/reference/specs.md §9.2)."""
    mig = dict(SELECTION, config="all-1g.5gb")
    problems = problems_of(host(mig_selection=mig, gpu_sharing_config=MPS4, gpu_operator_mig_strategy="single"))
    assert any("sharing config 'mps4' on node 'gpu-a': MPS is not supported on MIG-enabled GPUs" in p for p in problems), problems
    assert problems_of(host(gpu_sharing_config=MPS4, gpu_operator_mig_strategy="single")) == []


def test_host_names_that_are_no_node_names_are_refused():
    for name in ("gpu;reboot", "gpu-$(id)", "gpu a", "GPU-A"):
        problems = problems_of(host(), name)
        assert problems == ["%s: inventory host name %r is not a Kubernetes node name (a DNS-1123 subdomain: lower-case "
                            "letters, digits, '-' and '.', at most 253 characters); set gpufleet_node_name to the "
                            "host's node name" % (name, name)], problems
    assert problems_of(host(gpufleet_node_name="gpu-a"), "GPU A") == []
    assert variable_problems({"x y": {"inventory_hostname": "x y"}}, ["x y"])[0].startswith("x y: inventory host name")


def test_a_kubelet_owned_taint_key_is_refused_by_preflight():
    problems = problems_of(host(gpufleet_node_taints=[{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]))
    assert len(problems) == 1 and "host gpu-a (gpufleet_node_taints): taint 1: key 'node.kubernetes.io/unschedulable' is " \
        "reserved for Kubernetes" in problems[0]


def test_dra_driver_inputs_are_refused_by_preflight():
    """They were refused only by the DRA play, after the operator play had run."""
    problems = problems_of(host(dra_driver_namespace="DRA_ns", dra_driver_chart_version="25.12",
                                dra_driver_values={"resources": {"gpus": {"enabled": False}}}))
    assert problems == [
        "gpu-a: dra_driver_namespace: invalid Namespace name 'DRA_ns': it must be a DNS-1123 label (at most 63 lower-case "
        "letters, digits or '-', starting and ending with a letter or digit)",
        "gpu-a: dra_driver_chart_version: '25.12' is not a DRA driver version (X.Y.Z, e.g. 0.5.0 or 25.12.0)",
        "gpu-a: dra_driver_values: values.resources.gpus.enabled is False but the DRA backend needs True"], problems
    assert problems_of(host(dra_driver_values="x"))[0] == "gpu-a: dra_driver_values must be a mapping of chart values, got 'x'"
    assert problems_of(host(dra_driver_namespace="nvidia-dra-driver-gpu", dra_driver_chart_version="25.12.0",
                            dra_driver_values={"logVerbosity": 6})) == []


def test_claim_template_inputs_are_refused_by_preflight():
    problems = problems_of(host(gpufleet_dra_claim_templates=[{"namespaces": ["Team_A"], "kinds": ["gpu"], "count": 0},
                                                              {"namespace": ["x"]}]))
    for words in ("gpu-a: gpufleet_dra_claim_templates: claim_templates[0]: namespace 'Team_A' is not a DNS label",
                  "gpu-a: gpufleet_dra_claim_templates: claim_templates[0]: count must be a whole number",
                  "gpu-a: gpufleet_dra_claim_templates: claim_templates[1]: unknown key namespace (namespaces, kinds, count)"):
        assert any(p.startswith(words) for p in problems), (words, problems)
    huge = problems_of(host(gpufleet_dra_claim_templates=[{"namespaces": ["a"], "kinds": ["gpu"], "count": 10 ** 9}]))
    assert len(huge) == 1 and "count must be" in huge[0], huge  # the module's bound (issue 43, 1) reaches preflight
    assert problems_of(host(gpufleet_dra_claim_templates="x")) == [
        "gpu-a: gpufleet_dra_claim_templates must be a list of {namespaces, kinds, count}, got 'x'"]


def test_a_report_directory_that_cannot_be_written_is_refused_by_preflight(tmp_path):
    afile = tmp_path / "a-file"
    afile.write_text("x")
    for path, why in ((str(afile), "exists and is not a directory"), (str(afile / "reports"), "is not a directory"),
                      ("", "must be a non-empty path")):
        problems = preflight_problems({"gpu-a": host(inventory_hostname="gpu-a")}, ["gpu-a"], [], report_dir=path)
        assert len(problems) == 1 and problems[0].startswith("gpufleet_report_dir %r" % path) and why in problems[0], problems
    assert preflight_problems({"gpu-a": host()}, ["gpu-a"], [], report_dir=str(tmp_path / "new" / "reports")) == []
    assert not os.path.exists(str(tmp_path / "new"))  # checked, not created
