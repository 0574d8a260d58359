"""preflight.yml checks the hosts in play and every variable the run will use (issue 10 #7, #17, #18)."""
import os
import re
import subprocess
from test_preflight import ANSIBLE_PLAYBOOK

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
PLAYBOOK = os.path.join(REPO, 'playbooks', 'preflight.yml')

INVENTORY = '''
all:
  children:
    gpu_hosts:
      children:
        good:
          hosts:
            h100-good:
              gpufleet_gpu_model: H100-80GB
              mig_config: all-balanced
        bad:
          hosts:
            h100-bad:
              gpufleet_gpu_model: H100-80GB
              mig_config: no-such-config
    empty_group:
      hosts: {}
'''


def run_preflight(tmp_path, *args):
    (tmp_path / 'hosts.yml').write_text(INVENTORY)
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, '.build'), ANSIBLE_NOCOLOR='1')
    proc = subprocess.run([ANSIBLE_PLAYBOOK, '-i', str(tmp_path / 'hosts.yml'), PLAYBOOK, '-e', 'ansible_connection=local']
                          + list(args), capture_output=True, text=True, env=env, timeout=300, check=False)
    return proc, re.sub(r'\s+', ' ', proc.stdout + proc.stderr)


def test_limit_checks_only_the_hosts_in_play(tmp_path):
    proc, output = run_preflight(tmp_path, '--limit', 'h100-good')
    assert proc.returncode == 0, output[-3000:]
    assert 'Preflight passed for 1 host(s).' in output


def test_a_subset_group_is_accepted(tmp_path):
    proc, output = run_preflight(tmp_path, '-e', 'gpufleet_gpu_hosts=good')
    assert proc.returncode == 0, output[-3000:]
    assert 'Preflight passed for 1 host(s).' in output


def test_an_empty_group_is_refused_clearly(tmp_path):
    proc, output = run_preflight(tmp_path, '-e', 'gpufleet_gpu_hosts=empty_group')
    assert proc.returncode != 0
    assert "No GPU host to check: 'empty_group' (gpufleet_gpu_hosts) matches no host of the inventory" in output


def test_playbook_variables_are_validated(tmp_path):
    proc, output = run_preflight(tmp_path, '--limit', 'h100-good', '-e', 'gpufleet_mig_backend=hosts',
                                 '-e', '{"gpufleet_rollout_serial": ["1", "x%"]}',
                                 '-e', 'gpufleet_rollout_max_fail_percentage=150')
    assert proc.returncode != 0
    assert "h100-good: gpufleet_mig_backend must be 'host' or 'operator', got 'hosts'" in output
    assert "h100-good: gpufleet_rollout_serial must be a number of hosts, a percentage" in output
    assert "h100-good: gpufleet_rollout_max_fail_percentage must be an integer from 0 to 100, got '150'" in output


def test_a_failure_without_problems_is_not_dropped(tmp_path):
    proc, output = run_preflight(tmp_path, '--limit', 'h100-good', '-e', 'mig_configs=not-a-dict')
    assert proc.returncode != 0
    assert 'Preflight found' in output and 'h100-good: ' in output.split('Preflight found')[1]
    assert 'Preflight passed' not in output
