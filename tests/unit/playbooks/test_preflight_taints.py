"""Issue 13 (4): preflight reports invalid node taints and taints that no operand tolerates."""
import os

from test_preflight import run_preflight

HOSTS = '''
all:
  children:
    gpu_hosts:
      children:
        dedicated:
          vars:
            gpufleet_node_taints: [{key: dedicated, value: gpu, effect: NoSchedule}]
          hosts:
            h100-a: {gpufleet_gpu_model: H100-80GB}
        broken:
          vars:
            gpufleet_node_taints: [{key: team, value: a, effect: NoSchedul}]
          hosts:
            h100-b: {gpufleet_gpu_model: H100-80GB}
'''


def test_bad_taint_effect_is_reported(tmp_path):
    (tmp_path / 'hosts.yml').write_text(HOSTS)
    proc = run_preflight(str(tmp_path / 'hosts.yml'))
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert 'Preflight found 1 problem(s)' in output, output[-3000:]
    assert "host h100-b (gpufleet_node_taints): taint 1 (team): invalid effect 'NoSchedul'" in output


def test_taint_no_operand_tolerates_is_reported(tmp_path):
    (tmp_path / 'hosts.yml').write_text(HOSTS.replace('NoSchedul}', 'NoSchedule}') + '''
  vars:
    gpu_operator_tolerations: [{key: team, operator: Exists, effect: NoSchedule}]
''')
    proc = run_preflight(str(tmp_path / 'hosts.yml'))
    output = proc.stdout + proc.stderr
    assert 'Preflight found 1 problem(s)' in output, output[-3000:]
    assert 'host h100-a (gpufleet_node_taints): taint dedicated=gpu:NoSchedule is tolerated by no operand' in output


def test_declared_taints_pass_by_default(tmp_path):
    (tmp_path / 'hosts.yml').write_text(HOSTS.replace('NoSchedul}', 'NoSchedule}'))
    proc = run_preflight(str(tmp_path / 'hosts.yml'))
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    assert os.path.exists(str(tmp_path / 'hosts.yml'))
