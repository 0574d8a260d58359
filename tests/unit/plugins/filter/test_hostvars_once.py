"""Every filter over hostvars asks Ansible for a host's variables once per call (issue 26, fifth pass).

Each ``hostvars[host]`` makes ansible-core gather all of the host's variables again; a no-op
site.yml of 50 hosts asked 3,500 times. A fake hostvars counts the asks.
"""

from __future__ import annotations

import collections
import importlib
import inspect
import pkgutil

from ansible_collections.gpufleet.sharing.plugins import filter as filter_package
from ansible_collections.gpufleet.sharing.plugins.filter.backend_nodes import backend_hosts, backend_nodes
from ansible_collections.gpufleet.sharing.plugins.filter.preflight_problems import preflight_problems
from ansible_collections.gpufleet.sharing.plugins.filter.rollout_summary import rollout_annotate_again, rollout_summary
from ansible_collections.gpufleet.sharing.plugins.plugin_utils._hostvars import HostVarsOnce, hostvars_once, once

H100 = {"pci_device_id": "0x233010DE"}
SELECTION = {"config": "all-balanced", "configs": {}, "include_defaults": True}


class CountingHostvars(collections.abc.Mapping):
    """hostvars as a filter sees it, counting ``hostvars[host]``."""

    def __init__(self, hosts):
        self.hosts = hosts
        self.asked = collections.Counter()

    def __getitem__(self, host):
        self.asked[host] += 1
        return self.hosts[host]

    def __iter__(self):
        return iter(self.hosts)

    def __len__(self):
        return len(self.hosts)


def fleet():
    return CountingHostvars({
        "a": {"mig_selection": SELECTION, "ansible_facts": {"gpufleet_gpus": [H100]}, "gpufleet_node_name": "node-a",
              "rollout_outcome": "failed", "rollout_reason": "hook", "rollout_mark": "refused"},
        "b": {"mig_selection": SELECTION, "ansible_facts": {"gpufleet_gpus": [H100]}, "gpufleet_gpu_backend": "dra",
              "gpufleet_node_taints": [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]},
        "c": {"mig_selection": SELECTION, "gpufleet_gpu_model": "H100-80GB", "rollout_outcome": "changed"},
    })


def test_each_filter_asks_for_each_host_once_per_call():
    calls = [
        lambda hv: preflight_problems(hv, ["a", "b", "c"], [], checked=["a", "b", "c"]),
        lambda hv: rollout_summary(hv, ["a", "b", "c"], {}),
        lambda hv: rollout_annotate_again(hv, ["a", "b", "c"]),
        lambda hv: backend_nodes(hv, ["a", "b", "c"]),
        lambda hv: backend_hosts(hv, ["a", "b", "c"], ["b"]),
    ]
    for call in calls:
        hostvars = fleet()
        call(hostvars)
        assert set(hostvars.asked.values()) == {1}, (inspect.getsource(call).strip(), dict(hostvars.asked))


def test_the_views_live_for_one_call_only():
    hostvars = fleet()
    backend_nodes(hostvars, ["a"])
    hostvars.hosts["a"] = dict(hostvars.hosts["a"], gpufleet_gpu_backend="dra")
    assert backend_nodes(hostvars, ["a"])["dra"] == ["node-a"]  # a fact set by a later task is seen
    assert hostvars.asked["a"] == 2


def test_the_wrapper_is_a_mapping_over_the_same_hosts_and_wraps_once():
    hostvars = fleet()
    wrapped = once(hostvars)
    assert isinstance(wrapped, HostVarsOnce) and once(wrapped) is wrapped
    assert list(wrapped) == ["a", "b", "c"] and len(wrapped) == 3 and "b" in wrapped and "z" not in wrapped
    assert wrapped["a"] is wrapped["a"] and hostvars.asked["a"] == 1
    assert dict(wrapped.items())["c"]["rollout_outcome"] == "changed"

    hostvars.asked.clear()

    @hostvars_once
    def names(hv, hosts):
        return [hv[host].get("gpufleet_node_name", host) for host in hosts + hosts]
    assert names.__name__ == "names" and names(hostvars, ["b"]) == ["b", "b"] and hostvars.asked["b"] == 1


def test_every_filter_whose_first_argument_is_hostvars_is_wrapped():
    """One mechanism: a new filter over hostvars gets the same treatment or this test names it."""
    missing = []
    for module_info in pkgutil.iter_modules(list(filter_package.__path__)):
        module = importlib.import_module("%s.%s" % (filter_package.__name__, module_info.name))
        for name, function in module.FilterModule().filters().items():
            parameters = list(inspect.signature(inspect.unwrap(function)).parameters)
            if parameters and parameters[0] == "hostvars" and getattr(function, "__wrapped__", None) is None:
                missing.append("%s (%s)" % (name, module_info.name))
    assert missing == []
