"""Pure parts of gpu_sharing's cluster steps (_sharing_io) and of gpu_operator's (_operator_io)."""

from __future__ import annotations

from ansible_collections.gpufleet.sharing.plugins.module_utils.operator._operator_io import _without
from ansible_collections.gpufleet.sharing.plugins.module_utils.sharing._sharing import SharedResource, SharingConfig
from ansible_collections.gpufleet.sharing.plugins.module_utils.sharing._sharing_io import logged_mps_replicas, planned_mps

REAL_LOG = '''I1201 Starting Daemons.
I1201 Running with config:
{
  "version": "v1",
  "sharing": {
    "mps": {
      "resources": [
        {
          "name": "nvidia.com/gpu",
          "replicas": 4
        }
      ]
    }
  }
}
'''


def test_logged_mps_replicas_reads_the_last_config():
    assert logged_mps_replicas(REAL_LOG) == 4
    assert logged_mps_replicas('Running with config: {"replicas": 3}\nRunning with config: {"replicas": 5}') == 5
    assert logged_mps_replicas("no config yet") is None


def test_planned_mps_only_for_restarted_mps_nodes():
    configs = {"m": SharingConfig("m", "mps", (SharedResource("nvidia.com/gpu", 4),)),
               "t": SharingConfig("t", "time-slicing", (SharedResource("nvidia.com/gpu", 2),))}
    assert planned_mps({"a": "m", "b": "t", "c": "m"}, configs, {"a": ["p"], "b": ["q"]}) == {"a": 4}


def test_without_drops_carried_paths_and_the_maps_they_empty():
    values = {"devicePlugin": {"config": {"name": "cm"}}, "mig": {"strategy": "mixed"}}
    assert _without(values, ["devicePlugin.config.name"]) == {"mig": {"strategy": "mixed"}}
    assert values["devicePlugin"]["config"]["name"] == "cm"
    kept = {"devicePlugin": {"config": {"name": "cm", "default": "d"}}}
    assert _without(kept, ["devicePlugin.config.name"]) == {"devicePlugin": {"config": {"default": "d"}}}
