"""Issue 43 #4: claim templates asked for while no host is on DRA were skipped with no word. The role now
says so; with a host on DRA it does not (the module's own task runs instead)."""
import os
import subprocess

from test_preflight import ANSIBLE_PLAYBOOK, REPO

PLAY = '''
- name: The claim templates role alone
  hosts: gpu_hosts
  gather_facts: false
  roles:
    - role: gpufleet.sharing.claim_templates
'''
HOSTS = '''
all:
  vars:
    gpufleet_dra_claim_templates: [{namespaces: [vision], kinds: [1g.10gb]}]
  children:
    gpu_hosts:
      hosts:
        h100-a: {gpufleet_gpu_model: H100-80GB}
        h100-b: {gpufleet_gpu_model: H100-80GB}
'''


def run_play(tmp_path, hosts):
    (tmp_path / 'hosts.yml').write_text(hosts)
    (tmp_path / 'play.yml').write_text(PLAY)
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, '.build'), ANSIBLE_NOCOLOR='1')
    return subprocess.run([ANSIBLE_PLAYBOOK, '-i', str(tmp_path / 'hosts.yml'), str(tmp_path / 'play.yml'),
                           '-e', 'ansible_connection=local'], capture_output=True, text=True, env=env, timeout=300,
                          check=False)


def test_claim_templates_without_a_dra_host_are_said_to_be_skipped(tmp_path):
    proc = run_play(tmp_path, HOSTS)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert proc.stdout.count('WARNING: gpufleet_dra_claim_templates asks for 1 claim template entry, but no host '
                             'of this play is on the DRA backend') == 1, proc.stdout[-3000:]


def test_no_warning_without_claim_templates(tmp_path):
    proc = run_play(tmp_path, HOSTS.replace('[{namespaces: [vision], kinds: [1g.10gb]}]', '[]'))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert 'WARNING: gpufleet_dra_claim_templates' not in proc.stdout
