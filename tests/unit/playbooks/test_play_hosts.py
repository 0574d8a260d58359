"""Plays whose hosts are chosen as the play starts, in ansible-playbook's own process (issue 26).

A task that only decides whether later tasks run (an ``add_host`` into a group, a guard that fails on
a condition) costs a worker process every run, also when it does nothing. A play whose ``hosts`` is
computed from what the run already knows (the inventory, facts recorded by an earlier task) starts no
task at all when it has no host. These tests template each such play's ``hosts`` as
``ansible-playbook`` does (``groups``, ``hostvars``, the extra variables) and check whom it runs on.
"""
import glob
import json
import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
INVENTORY = ['a100-0', 'a100-1', 'h100-0', 'h100-1', 'h200-0', 'h200-1']
GROUPS = {'all': INVENTORY, 'ungrouped': [], 'gpu_hosts': INVENTORY}


# Templated in a Python of its own, as ansible-playbook does it: with the plugin loader initialised
# (the lookups, ansible.builtin.inventory_hostnames) and the collection's filters.
_TEMPLATE = """
import glob, importlib, json, os, sys
import yaml
from ansible.plugins.loader import init_plugin_loader
init_plugin_loader([sys.argv[1]])
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template
repo = sys.argv[2]
filters = {}
for path in sorted(glob.glob(os.path.join(repo, 'plugins', 'filter', '*.py'))):
    module = importlib.import_module('ansible_collections.gpufleet.sharing.plugins.filter.' + os.path.basename(path)[:-3])
    filters.update({'gpufleet.sharing.' + name: function for name, function in module.FilterModule().filters().items()})
answers = []
for case in json.load(sys.stdin):
    with open(os.path.join(repo, 'playbooks', case['playbook']), encoding='utf-8') as handle:
        plays = [entry for entry in yaml.safe_load(handle) if entry.get('name') == case['name']]
    assert len(plays) == 1, case
    templar = Templar(loader=DataLoader(), variables=dict(case['extra_vars'], groups=case['groups'], hostvars=case['hostvars']))
    templar.environment.filters.update(filters)
    answer = templar.template(trust_as_template(plays[0]['hosts']))
    answers.append([answer] if isinstance(answer, str) else list(answer))
print(json.dumps(answers))
"""


def hosts_of_all(cases):
    """Each case (playbook, play name, hostvars, groups, extra variables) -> the hosts of that play."""
    build = os.path.join(REPO, '.build')
    payload = []
    for playbook, name, hostvars, groups, extra_vars in cases:
        groups = GROUPS if groups is None else groups
        hostvars = dict({host: {} for host in groups['all']}, **(hostvars or {}))
        hostvars = {host: dict(values, inventory_hostname=host) for host, values in hostvars.items()}
        payload.append({'playbook': playbook, 'name': name, 'hostvars': hostvars, 'groups': groups, 'extra_vars': extra_vars})
    proc = subprocess.run([sys.executable, '-c', _TEMPLATE, build, REPO], input=json.dumps(payload), text=True,
                          capture_output=True, check=False, env=dict(os.environ, ANSIBLE_COLLECTIONS_PATH=build))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


def case(playbook, name, hostvars=None, groups=None, **extra_vars):
    return (playbook, name, hostvars, groups, extra_vars)


def check(expected_cases):
    """[(case, expected hosts)]: every play's hosts as expected (one Python for all of them)."""
    cases = [entry[0] for entry in expected_cases]
    assert list(zip(cases, hosts_of_all(cases))) == [(entry[0], entry[1]) for entry in expected_cases]


@pytest.mark.parametrize('playbook, name', [('preflight.yml', 'Preflight - refuse an empty host group'),
                                            ('rollout.yml', 'Rollout - refuse an empty host group')])
def test_the_refusal_of_an_empty_host_group_runs_only_when_the_group_is_empty(playbook, name):
    check([(case(playbook, name), []),
           (case(playbook, name, gpufleet_gpu_hosts='h100-*'), []),
           (case(playbook, name, gpufleet_gpu_hosts='no_such_group'), ['localhost']),
           (case(playbook, name, groups={'all': [], 'ungrouped': []}), ['localhost'])])


def test_the_hosts_preflight_could_not_read_are_read_again_in_the_inventory_order():
    name = 'Cluster - read the GPU hosts preflight did not read'
    check([(case('site.yml', name), []),  # preflight recorded nothing (site.yml without it)
           (case('site.yml', name, {'localhost': {'gpufleet_preflight': {'unread': []}}}), []),
           (case('site.yml', name, {'localhost': {'gpufleet_preflight': {'unread': ['h200-1', 'a100-1']}}}),
            ['a100-1', 'h200-1'])])


@pytest.mark.parametrize('name', ['Cluster - plan operator-managed MIG for the whole fleet',
                                  "Cluster - MIG through the operator's MIG manager, node by node"])
def test_the_operator_plays_run_on_the_operator_backends_hosts_only(name):
    hostvars = {'h200-1': {'gpufleet_mig_backend': 'operator'}, 'a100-1': {'gpufleet_mig_backend': 'operator'},
                'h100-0': {'gpufleet_mig_backend': 'host'}}
    check([(case('site.yml', name), []),
           (case('site.yml', name, hostvars), ['a100-1', 'h200-1']),
           (case('site.yml', name, hostvars, gpufleet_gpu_hosts='h200-*'), ['h200-1'])])


def test_the_dra_driver_play_runs_only_for_a_dra_fleet_or_when_asked():
    name = 'Cluster - the DRA driver'
    dra = {'h100-1': {'gpufleet_gpu_backend': 'dra'}}
    check([(case('site.yml', name), []),
           (case('site.yml', name, dra), ['localhost']),
           (case('site.yml', name, dict(dra, localhost={'gpufleet_dra_manage': False})), []),
           (case('site.yml', name, {'localhost': {'gpufleet_dra_manage': True}}), ['localhost'])])


def test_verify_refuses_invalid_run_variables_only_when_there_are_some():
    name = 'Verify - refuse invalid run variables'
    check([(case('verify.yml', name), []),
           (case('verify.yml', name, {'localhost': {'gpufleet_verify_scope': {'problems': [], 'read': []}}}), []),
           (case('verify.yml', name, {'localhost': {'gpufleet_verify_scope': {'problems': ['x'], 'read': []}}}),
            ['localhost'])])


def test_verify_reads_the_hosts_it_found_in_the_inventory_order():
    name = 'Verify - read the GPU hosts not read in this run'
    scope = {'problems': [], 'read': ['h200-0', 'a100-0']}
    check([(case('verify.yml', name, {'localhost': {'gpufleet_verify_scope': scope}}), ['a100-0', 'h200-0']),
           (case('verify.yml', name), [])])


def test_the_hosts_without_a_usable_read_plan_on_their_host():
    name = 'Rollout - plan on the host the nodes without a usable read (changes nothing)'
    triage = {host: {'outcome': 'unchanged'} for host in INVENTORY}
    triage.update({'h200-0': {'outcome': 'unplanned'}, 'a100-1': {'outcome': 'unplanned'}})
    check([(case('rollout.yml', name, {host: {'rollout_triage': triage} for host in INVENTORY}), ['a100-1', 'h200-0']),
           (case('rollout.yml', name), [])])


def test_the_lock_is_taken_by_a_play_that_runs_only_when_something_must_change():
    name = 'Rollout - take the lock before a change (only when something must change)'
    check([(case('rollout.yml', name), []),
           (case('rollout.yml', name, {'localhost': {'rollout_run_must_change': False}}), []),
           (case('rollout.yml', name, {'localhost': {'rollout_run_must_change': True}}), ['gpu_hosts']),
           (case('rollout.yml', name, {'localhost': {'rollout_run_must_change': True}}, gpufleet_gpu_hosts='h100-*'),
            ['h100-*'])])


def test_no_task_groups_hosts_for_a_later_play():
    """Groups filled by a task (add_host, group_by) cost a worker per run; a play's hosts are chosen as it starts."""
    found = []
    for path in sorted(glob.glob(os.path.join(REPO, 'playbooks', '*.yml'))
                       + glob.glob(os.path.join(REPO, 'roles', '*', 'tasks', '*.yml'))):
        with open(path, encoding='utf-8') as handle:
            text = handle.read()
        found += ['%s: %s' % (os.path.relpath(path, REPO), word) for word in ('add_host', 'group_by') if word in text]
    assert found == []
