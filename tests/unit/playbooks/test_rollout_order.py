"""The rollout's batches follow the inventory's order, whatever order the hosts' plans came back in.

The canary (the first batch) must be the first host of the inventory that needs a change. The
plan play once grouped those hosts with ``group_by``, whose group fills in the order the hosts' results
reach the controller: with forks, a race. The batch play's host list must not inherit that order.
"""
import os

import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
INVENTORY_ORDER = ['a100-0', 'a100-1', 'h100-0', 'h100-1', 'h200-0', 'h200-1']


def batch_play_hosts(groups):
    with open(os.path.join(REPO, 'playbooks', 'rollout.yml'), encoding='utf-8') as handle:
        plays = yaml.safe_load(handle)
    batch_play = [play for play in plays if 'serial' in play]
    assert len(batch_play) == 1, 'one serial play in rollout.yml'
    templar = Templar(loader=DataLoader(), variables={'groups': groups})
    return templar.template(trust_as_template(batch_play[0]['hosts']))


def test_batches_follow_the_inventory_not_the_order_results_arrived_in():
    groups = {'all': INVENTORY_ORDER, 'ungrouped': [], 'gpu_hosts': INVENTORY_ORDER,
              'gpufleet_rollout_pending': ['h200-1', 'a100-1', 'h100-0', 'a100-0']}
    assert list(batch_play_hosts(groups)) == ['a100-0', 'a100-1', 'h100-0', 'h200-1']


def test_no_pending_host_means_no_batch():
    groups = {'all': INVENTORY_ORDER, 'ungrouped': [], 'gpu_hosts': INVENTORY_ORDER}
    assert list(batch_play_hosts(groups)) == []
