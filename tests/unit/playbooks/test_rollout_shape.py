"""Issue 20 item 2: rollout.yml keeps the order of its plays; the rollout role does the work per node.

A node's outcome and steps come from Python (rollout_triage, rollout_steps) and are only read by the YAML;
the run-wide defaults are stated once (the role's defaults); the node-name rule is not written in Jinja.
"""
import glob
import os

import yaml

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
PLAYBOOK = os.path.join(REPO, 'playbooks', 'rollout.yml')
ROLE = os.path.join(REPO, 'roles', 'rollout')


def read(path):
    with open(path, encoding='utf-8') as handle:
        return handle.read()


def yaml_files():
    paths = glob.glob(os.path.join(REPO, 'roles', '*', '*', '*.yml')) + glob.glob(os.path.join(REPO, 'playbooks', '*.yml'))
    return {os.path.relpath(path, REPO): read(path) for path in paths}


def test_the_playbook_is_the_order_of_the_plays_and_fits_on_two_screens():
    text = read(PLAYBOOK)
    assert len(text.splitlines()) <= 100
    plays = yaml.safe_load(text)
    assert [play['name'] for play in plays] == [
        'Rollout - refuse an empty host group', 'Rollout - check the lock and plan every node at once (changes nothing on the nodes)',
        'Rollout - plan on the host the nodes without a usable read (changes nothing)',
        'Rollout - settle every node at once (changes nothing on the nodes)',
        'Rollout - take the lock before a change (only when something must change)', 'Rollout - MIG changes on GPU hosts in batches',
        'Rollout - summary']
    assert text.count('group/gpufleet.sharing.k8s') == 1  # the module_defaults block once


def test_outcomes_are_read_not_recomputed():
    role = ''.join(read(path) for path in glob.glob(os.path.join(ROLE, 'tasks', '*.yml')))
    for text in (read(PLAYBOOK), role):
        assert "== 'pending'" not in text and "'pending'" not in text
    steps = yaml.safe_load(read(os.path.join(ROLE, 'tasks', 'main.yml')))[2]['block']
    for task in steps[1:-1]:  # after begin.yml, before the record of the change: one step file each
        step = task['ansible.builtin.import_tasks'][:-len('.yml')]
        assert task['when'] == "'%s' in rollout_steps" % step


def test_defaults_and_the_node_name_rule_are_stated_once():
    for path, text in yaml_files().items():
        assert 'gpufleet_node_name | default(inventory_hostname)' not in text, path
        if path != os.path.join('roles', 'rollout', 'defaults', 'main.yml') and not path.startswith(os.path.join('roles', 'mig')):
            assert "gpu_operator_namespace | default('gpu-operator')" not in text, path
    assert 'gpufleet_drift_plan_only' not in ''.join(yaml_files().values())
    assert "hostvars['localhost'].rollout_triage" not in ''.join(yaml_files().values())
