"""Issue 43 (3): three of the quota inputs - team counts over the fleet's capacity without over-commit, a share
of a profile the catalog knows but no planned host advertises (still the module's warning, not a refusal) - passed site.yml's preflight and were refused only
by gpu_quotas in the quotas play, after the operator play had run. Now the preflight runs gpu_quotas' own plan.

The hosts run with ansible_connection=local; their GPU read is a stand-in ``nvidia-smi`` on PATH that prints
two H100s with MIG disabled (the only call gpu_facts makes then), run by this test's Python. Nothing connects
anywhere.
"""
import os
import subprocess
import sys
from test_preflight import ANSIBLE_PLAYBOOK

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
ROWS = ''.join('%d, NVIDIA H100 80GB HBM3, GPU-%d0000000-0000-0000-0000-000000000000, 00000000:0%d:00.0, 0x233010DE, '
               '81559, Disabled, Disabled, 580.95.05\\n' % (i, i, i + 1) for i in range(2))
INVENTORY = '''all:
  children:
    gpu_hosts:
      hosts:
        gpu-a:
        gpu-b:
      vars:
        mig_config: all-disabled
        gpufleet_teams:
          - {name: vision, namespaces: [vision], shares: {nvidia.com/gpu: 3}}
          - {name: nlp, namespaces: [nlp], shares: {nvidia.com/gpu: 2, nvidia.com/mig-1g.10gb: 1}}
'''


def run_site(tmp_path, *extra):
    bindir = tmp_path / 'bin'
    bindir.mkdir()
    smi = bindir / 'nvidia-smi'
    smi.write_text('#!/bin/sh\ncase "$*" in\n  --query-gpu=index,name,*) printf "%s";;\n  *) echo "unexpected: $*" >&2; exit 2;;\n'
                   'esac\n' % ROWS)
    smi.chmod(0o755)
    (tmp_path / 'hosts.yml').write_text(INVENTORY)
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, '.build'), ANSIBLE_NOCOLOR='1',
               PATH='%s:%s' % (bindir, os.environ.get('PATH', '')))
    return subprocess.run([ANSIBLE_PLAYBOOK, '-i', str(tmp_path / 'hosts.yml'), os.path.join(REPO, 'playbooks', 'site.yml'),
                           '-e', 'ansible_connection=local',
                           '-e', 'ansible_python_interpreter=%s' % sys.executable]
                          + list(extra), capture_output=True, text=True, env=env, timeout=300, check=False)


def test_site_refuses_quotas_the_planned_hosts_cannot_give_before_the_operator_play(tmp_path):
    proc = run_site(tmp_path)
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0, output[-3000:]
    assert 'Preflight found 1 problem(s); nothing was changed' in output, output[-3000:]
    planned = 'gpufleet_teams over the planned hosts (gpu-a, gpu-b): '
    for words in (planned + "resource nvidia.com/gpu, flavor gpufleet-nvidia-h100-80gb-hbm3: the teams' quotas add up "
                  "to 5 (vision 3, nlp 2), the nodes advertise 4; lower the shares or set gpufleet_quota_overcommit: true",):
        assert words in output, words
    assert 'PLAY [Cluster - the GPU Operator]' not in output  # nothing after preflight ran
