"""The benchmarks say why a run failed: the task, the host and the module's message (issue 26, item 4)."""
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', '..', 'bench'))

import benchlib  # noqa: E402

OPERATOR_TIMEOUT = '\n'.join([
    'PLAY [Cluster - the GPU Operator] ' + '*' * 40,
    '',
    'TASK [gpufleet.sharing.gpu_operator : Install or upgrade the GPU Operator] ' + '*' * 20,
    'fatal: [localhost]: FAILED! => {"changed": false, "cluster_policy_state": "notReady", '
    '"diagnosis": {"pods": {"ContainerCreating": 1000}}, '
    '"msg": "ClusterPolicy cluster-policy not ready after 120s (state notReady)", "waited": 120}',
    '',
    'PLAY RECAP ' + '*' * 60,
    'h100-00                    : ok=4    changed=0    unreachable=0    failed=0    skipped=2',
    'localhost                  : ok=9    changed=1    unreachable=0    failed=1    skipped=2',
    '',
] + ['filler line %d %s' % (n, 'x' * 80) for n in range(60)])


def test_report_names_task_host_and_message():
    report = benchlib.failure_report('converge of 200 hosts', OPERATOR_TIMEOUT, returncode=2)
    assert report.splitlines()[0] == 'converge of 200 hosts failed (rc=2)'
    assert 'task "gpufleet.sharing.gpu_operator : Install or upgrade the GPU Operator" on localhost: ' \
           'ClusterPolicy cluster-policy not ready after 120s (state notReady)' in report
    assert '"ContainerCreating": 1000' in report
    assert 'filler' not in report  # not the output's tail


def test_ignored_failures_and_ok_tasks_are_not_causes():
    output = '\n'.join([
        'TASK [probe] ***',
        'fatal: [h1]: FAILED! => {"changed": false, "msg": "no"}',
        '...ignoring',
        'TASK [real] ***',
        'failed: [h2] (item=a) => {"msg": "bad item"}',
        'fatal: [h3]: UNREACHABLE! => {"changed": false, "msg": "ssh: connect refused", "unreachable": true}',
    ])
    found = benchlib.failures(output)
    assert [(f['task'], f['host']) for f in found] == [('real', 'h2'), ('real', 'h3')]


def test_no_failed_task_says_the_error_lines():
    report = benchlib.failure_report('no-op', 'PLAY RECAP ***\n', stderr='ERROR! the playbook: x.yml could not be found\n',
                                     returncode=1)
    assert 'ERROR! the playbook: x.yml could not be found' in report


def test_run_failed_carries_the_report():
    proc = subprocess.CompletedProcess(['ansible-playbook'], 2, stdout=OPERATOR_TIMEOUT, stderr='')
    error = benchlib.RunFailed('converge', proc)
    assert 'on localhost: ClusterPolicy cluster-policy not ready' in str(error)
    assert len(str(error)) < 1000


def test_coloured_output_of_ansible_runner():
    output = '\x1b[0;31mTASK [apply] ***\x1b[0m\n\x1b[0;31mfatal: [a100-01]: FAILED! => {"msg": "busy GPU"}\x1b[0m\n'
    assert benchlib.failures(output) == [{'task': 'apply', 'host': 'a100-01', 'message': 'busy GPU'}]
