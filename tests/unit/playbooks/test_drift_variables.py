"""playbooks/drift.yml refuses bad variables before it reads anything (no host is contacted)."""
import os
import subprocess

import pytest
from test_preflight import ANSIBLE_PLAYBOOK

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
PLAYBOOK = os.path.join(REPO, 'playbooks', 'drift.yml')


@pytest.mark.parametrize('extra, fragment', [
    ('gpufleet_drift_fail=maybe', 'gpufleet_drift_fail must be a boolean (got maybe)'),
    ('{"gpufleet_report_dir": ""}', "gpufleet_report_dir a non-empty path (got )"),
    ('{"gpufleet_report_dir": ["a"]}', "gpufleet_report_dir a non-empty path (got ['a'])"),
])
def test_bad_variables_are_refused_before_any_read(tmp_path, extra, fragment):
    (tmp_path / 'hosts.yml').write_text('all:\n  children:\n    gpu_hosts:\n      hosts:\n'
                                        '        gpu-a: {ansible_host: 127.0.0.254, gpufleet_gpu_model: H100-80GB}\n')
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, '.build'), ANSIBLE_NOCOLOR='1')
    proc = subprocess.run([ANSIBLE_PLAYBOOK, '-i', str(tmp_path / 'hosts.yml'), PLAYBOOK, '-e', extra],
                          capture_output=True, text=True, env=env, timeout=300, check=False)
    output = ' '.join((proc.stdout + proc.stderr).split())
    assert proc.returncode != 0
    assert fragment in output and 'nothing was read' in output, output[-2000:]
    assert 'gpu-a' not in proc.stdout.split('PLAY RECAP')[-1]  # the host was never in play
