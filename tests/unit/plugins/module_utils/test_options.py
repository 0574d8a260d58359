"""Option checks and Kubernetes name rules (docs/reference/specs.md §12)."""

from __future__ import annotations

import pytest

from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._resources import BUILTIN_TYPES, name_problem
from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._api_errors import K8sError
from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._options import (
    number_problems, object_name_problems, qualified_name_problem, selector_problem)


@pytest.mark.parametrize("kind,name", [("Node", "gpu-a"), ("Node", "node-1.example.com"), ("Namespace", "gpu-operator"),
                                       ("ClusterRole", "system:gpufleet"), ("Pod", "a" * 253)])
def test_valid_names(kind, name):
    assert name_problem(kind, name) is None


@pytest.mark.parametrize("kind,name", [("Node", "h100-0/status"), ("Node", "../x"), ("Node", ".."), ("Node", "GPU-A"),
                                       ("Node", "a\n"), ("Node", ""), ("Namespace", "a.b"), ("Namespace", "a" * 64),
                                       ("Pod", "a" * 254), ("ClusterRole", "a/b"), ("ClusterRole", ".."), ("Node", None)])
def test_invalid_names(kind, name):
    assert "invalid %s name" % kind in name_problem(kind, name)


def test_paths_are_never_built_from_bad_names():
    with pytest.raises(K8sError, match="nothing was sent"):
        BUILTIN_TYPES["Node"].path("h100-0/status")
    with pytest.raises(K8sError, match="invalid Namespace name"):
        BUILTIN_TYPES["Pod"].path("p", "../kube-system")
    assert BUILTIN_TYPES["Pod"].path("p", "ns", "log") == "/api/v1/namespaces/ns/pods/p/log"


@pytest.mark.parametrize("selector", ["app=x", "app==x,tier!=db", "env in (a,b),!legacy", "gpu", "example.com/app notin (x)"])
def test_valid_selectors(selector):
    assert selector_problem("pod_selectors", selector) is None


@pytest.mark.parametrize("selector", ["app in (x", "a b=c", "app=x y", "!app=x", "=x", "app=$(id)"])
def test_invalid_selectors(selector):
    assert selector_problem("pod_selectors", selector).startswith("pod_selectors:")


def test_keys_numbers_and_names_name_the_option():
    assert qualified_name_problem("annotations", "gpufleet.sharing/rollout") is None
    assert "annotations" in qualified_name_problem("annotations", "a b/c/d")
    assert number_problems({"timeout": -5, "poll_interval": 0, "grace_period": None}, {"timeout": 0, "grace_period": 0},
                           ["poll_interval"]) == ["timeout must be >= 0, got -5", "poll_interval must be > 0, got 0"]
    assert object_name_problems([("node", "Node", "a/b"), ("namespace", "Namespace", None)])[0].startswith("node: invalid")
