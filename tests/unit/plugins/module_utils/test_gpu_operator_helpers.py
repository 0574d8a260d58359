"""Pure helpers of the gpu_operator module (_gpu_operator): CRDs from helm output, wait options."""

from __future__ import annotations

import pytest

from ansible_collections.gpufleet.sharing.plugins.module_utils.operator import _gpu_operator

CRD = """---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: clusterpolicies.nvidia.com
---
"""


def test_crds_from_text_reads_the_stream():
    crds = _gpu_operator.crds_from_text(CRD)
    assert [crd["metadata"]["name"] for crd in crds] == ["clusterpolicies.nvidia.com"]


def test_crds_from_text_rejects_what_is_not_yaml():
    with pytest.raises(ValueError):
        _gpu_operator.crds_from_text("kind: [CustomResourceDefinition")


def test_wait_problems():
    assert not _gpu_operator.wait_problems(0, 0.5)
    assert _gpu_operator.wait_problems(-1, 1) == ["wait_timeout must be >= 0, got -1"]
    assert _gpu_operator.wait_problems(1, 0) == ["wait_interval must be > 0"]
