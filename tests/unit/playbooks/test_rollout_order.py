"""The rollout's batches follow the inventory's order, whatever order the hosts' plans came back in.

The canary (the first batch) must be the first host of the inventory that needs a change. The
plan play once grouped those hosts with ``group_by``, whose group fills in the order the hosts' results
reach the controller: with forks, a race. The batch play's host list must not inherit that order.
It is chosen as the play starts from this run's triage (the ``rollout_triage`` fact), with no task.
"""
import os

import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

from ansible_collections.gpufleet.sharing.plugins.filter.rollout_triage import FilterModule

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
INVENTORY_ORDER = ['a100-0', 'a100-1', 'h100-0', 'h100-1', 'h200-0', 'h200-1']


def batch_play_hosts(groups, triage=None):
    with open(os.path.join(REPO, 'playbooks', 'rollout.yml'), encoding='utf-8') as handle:
        plays = yaml.safe_load(handle)
    batch_play = [play for play in plays if 'serial' in play]
    assert len(batch_play) == 1, 'one serial play in rollout.yml'
    # the fact set once for the play (run_once): every GPU host has it, the others not
    hostvars = {host: ({'rollout_triage': triage} if triage is not None and host in groups['gpu_hosts'] else {})
                for host in groups['all']}
    templar = Templar(loader=DataLoader(), variables={'groups': groups, 'hostvars': hostvars})
    templar.environment.filters.update({'gpufleet.sharing.' + name: function
                                        for name, function in FilterModule().filters().items()})
    return templar.template(trust_as_template(batch_play[0]['hosts']))


def triage_of(outcomes):
    return {host: {'outcome': outcome, 'node': host} for host, outcome in outcomes.items()}


def test_batches_follow_the_inventory_not_the_order_results_arrived_in():
    groups = {'all': INVENTORY_ORDER, 'ungrouped': [], 'gpu_hosts': INVENTORY_ORDER}
    # the triage in the order the results came back in
    triage = triage_of({'h200-1': 'mig_change', 'a100-1': 'files_only', 'h200-0': 'unchanged', 'h100-0': 'mig_change',
                        'h100-1': 'unreachable', 'a100-0': 'mig_change'})
    assert list(batch_play_hosts(groups, triage)) == ['a100-0', 'a100-1', 'h100-0', 'h200-1']


def test_the_first_gpu_host_with_the_triage_decides_whatever_comes_first_in_the_inventory():
    groups = {'all': ['localhost-like'] + INVENTORY_ORDER, 'ungrouped': ['localhost-like'], 'gpu_hosts': INVENTORY_ORDER}
    triage = triage_of({host: 'unchanged' for host in INVENTORY_ORDER} | {'h100-1': 'mig_change'})
    assert list(batch_play_hosts(groups, triage)) == ['h100-1']


def test_no_pending_host_means_no_batch():
    groups = {'all': INVENTORY_ORDER, 'ungrouped': [], 'gpu_hosts': INVENTORY_ORDER}
    assert list(batch_play_hosts(groups)) == []  # before any triage
    assert list(batch_play_hosts(groups, triage_of({host: 'unchanged' for host in INVENTORY_ORDER}))) == []
