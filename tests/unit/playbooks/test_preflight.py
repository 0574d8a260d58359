"""playbooks/preflight.yml on inventories: the example must pass, a broken one must list every problem.

Every host here runs with ansible_connection=local and declares its GPU model, so nothing connects
anywhere (the example inventory's addresses are documentation, never contacted).
"""
import os
import sys
import subprocess

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
PLAYBOOK = os.path.join(REPO, 'playbooks', 'preflight.yml')
# The ansible-playbook of the Python that runs the tests (.venv's, or a matrix leg's venv: tests/tools/matrix_leg.sh).
ANSIBLE_PLAYBOOK = os.path.join(os.path.dirname(sys.executable), 'ansible-playbook')


def run_preflight(inventory):
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, '.build'), ANSIBLE_NOCOLOR='1')
    return subprocess.run([ANSIBLE_PLAYBOOK, '-i', inventory, PLAYBOOK, '-e', 'ansible_connection=local'],
                          capture_output=True, text=True, env=env, timeout=300, check=False)


def test_example_inventory_passes():
    proc = run_preflight(os.path.join(REPO, 'inventories', 'example'))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert 'Preflight passed for 8 host(s).' in proc.stdout


def test_every_problem_is_listed_at_once(tmp_path):
    (tmp_path / 'hosts.yml').write_text('''
all:
  children:
    gpu_hosts:
      hosts:
        a100-bad:
          gpufleet_gpu_model: A100-40GB
          mig_config: too-big
          mig_configs:
            too-big:
              - devices: all
                mig-enabled: true
                mig-devices: {"4g.20gb": 2}
        h200-bad:
          gpufleet_gpu_model: H200
          mig_config: all-1g.10gb
        h100-bad:
          gpufleet_gpu_model: H100-80GB
          mig_config: no-such-config
        h100-good:
          gpufleet_gpu_model: H100-80GB
          mig_config: all-balanced
''')
    proc = run_preflight(str(tmp_path / 'hosts.yml'))
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert 'Preflight found 3 problem(s); nothing was changed' in output
    assert 'a100-bad: mig-parted config too-big cannot be applied' in output
    assert 'allows at most 1 4g.20gb instance' in output
    assert 'h200-bad: no item of mig-parted config all-1g.10gb applies to H200' in output
    assert 'h100-bad:' in output and 'no-such-config' in output
    assert 'h100-good' not in output.split('Preflight found')[1].split('PLAY RECAP')[0]


def test_blackwell_models_and_the_media_engine_rule(tmp_path):
    """Issue 12: preflight knows the new catalog models and refuses two +me instances on an A30
    (docs/reference/specs.md §2.13 to §2.16)."""
    (tmp_path / 'hosts.yml').write_text('''
all:
  children:
    gpu_hosts:
      hosts:
        rtx-good:
          gpufleet_gpu_model: RTX-PRO-6000
          mig_config: all-1g.24gb.gfx
        gb200-good:
          gpufleet_gpu_model: GB200
          mig_config: all-balanced
        b300-good:
          gpufleet_gpu_model: "0x318210DE"
          mig_config: all-7g.269gb
        a30-bad:
          gpufleet_gpu_model: A30
          mig_config: two-me
          mig_configs:
            two-me:
              - devices: all
                mig-enabled: true
                mig-devices: {"1g.6gb+me": 1, "2g.12gb+me": 1}
''')
    proc = run_preflight(str(tmp_path / 'hosts.yml'))
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert 'Preflight found 1 problem(s); nothing was changed' in output
    assert 'a30-bad: mig-parted config two-me cannot be applied' in output
    assert 'needs 2 JPEG decoders but A30 has 1' in output


def test_indexes_of_a_declared_model_are_said_to_be_unchecked(tmp_path):
    """Issue 21 (11): a declared model means no read, so ``devices: [5]`` cannot be checked: the preflight says so."""
    (tmp_path / 'hosts.yml').write_text('''
all:
  children:
    gpu_hosts:
      hosts:
        a100-declared:
          gpufleet_gpu_model: A100-40GB
          mig_config: fifth
          mig_configs:
            fifth:
              - devices: [5]
                mig-enabled: true
                mig-devices: {"1g.5gb": 7}
''')
    proc = run_preflight(str(tmp_path / 'hosts.yml'))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert ('Preflight passed for 1 host(s). Not checked: a100-declared: config fifth item 0 names GPU 5: not checked '
            "against the host's GPUs (gpufleet_gpu_model is declared") in proc.stdout
