"""The gpu_facts module against a fake nvidia-smi that replays fixtures and logs its calls."""
import json
import os
import stat

import pytest

from module_runner import run_module

FIXTURES = os.path.join(os.path.dirname(__file__), '..', '..', '..', 'fixtures')

FAKE = r'''#!/usr/bin/env python3
import json, os, sys
args = sys.argv[1:]
with open(os.environ['FAKE_SMI_LOG'], 'a') as log:
    log.write(json.dumps(args) + '\n')
answers = json.load(open(os.environ['FAKE_SMI_ANSWERS']))
key = ' '.join(a for a in args if not a.startswith('--query-gpu') and not a.startswith('--format')) or 'summary'
if args and args[0].startswith('--query-gpu'):
    key = 'query'
out, rc = answers.get(key, ['unexpected call %s' % args, 99])
sys.stdout.write(out)
sys.exit(rc)
'''


def strip_capture(path):
    with open(path) as handle:
        return ''.join(l for l in handle.readlines() if not l.startswith('$ ') and not l.startswith('[rc='))


def make_fake(tmp_path, answers):
    fake = tmp_path / 'nvidia-smi'
    fake.write_text(FAKE)
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    (tmp_path / 'answers.json').write_text(json.dumps(answers))
    env = {'FAKE_SMI_LOG': str(tmp_path / 'calls.log'), 'FAKE_SMI_ANSWERS': str(tmp_path / 'answers.json')}
    return str(fake), env


def calls(tmp_path):
    return [json.loads(l) for l in (tmp_path / 'calls.log').read_text().splitlines()]


def h200_answers():
    h200 = os.path.join(FIXTURES, 'h200')
    header, row = strip_capture(os.path.join(h200, 'query.txt')).splitlines()[:2]
    values = dict(zip([h.split(' [')[0] for h in header.split(', ')], row.split(', ')))
    fields = ['index', 'name', 'uuid', 'pci.bus_id', 'pci.device_id', 'memory.total',
              'mig.mode.current', 'mig.mode.pending', 'driver_version']
    return {
        'query': [', '.join(values[f].replace(' MiB', '') for f in fields) + '\n', 0],
        'summary': [strip_capture(os.path.join(h200, 'smi.txt')), 0],
        'mig -lgip': [strip_capture(os.path.join(h200, 'mig_lgip.txt')), 0],
        'mig -lgipp': [strip_capture(os.path.join(h200, 'mig_lgipp.txt')), 0],
    }


def test_h200_facts_in_four_calls(tmp_path):
    path, env = make_fake(tmp_path, h200_answers())
    result = run_module('gpu_facts', {'nvidia_smi_path': path}, tmp_path, env=env)
    assert not result.get('failed'), result
    facts = result['ansible_facts']
    assert facts['gpufleet_nvidia_smi_calls'] == 4 == len(calls(tmp_path))
    gpu = facts['gpufleet_gpus'][0]
    assert gpu['uuid'] == 'GPU-163e5d76-4ee1-1290-9652-cc41f8103e00'
    assert gpu['mig']['capable'] and not gpu['mig']['current']
    assert len(gpu['supported_profiles']) == 7
    assert calls(tmp_path)[0][0].startswith('--query-gpu=index,name,uuid')


def test_a100_with_mig_in_seven_calls(tmp_path):
    a100 = os.path.join(FIXTURES, 'a100-mig')

    def read(name):
        with open(os.path.join(a100, name)) as handle:
            return handle.read()
    answers = {'query': [read('query.txt'), 0], 'summary': [read('smi.txt'), 0], '-L': [read('L.txt'), 0],
               'mig -lgi': [read('lgi.txt'), 0], 'mig -lci': [read('lci.txt'), 0],
               'mig -lgip': [read('lgip.txt'), 0], 'mig -lgipp': [read('lgipp.txt'), 0]}
    path, env = make_fake(tmp_path, answers)
    result = run_module('gpu_facts', {'nvidia_smi_path': path}, tmp_path, env=env)
    facts = result['ansible_facts']
    assert facts['gpufleet_nvidia_smi_calls'] == 7
    assert [i['profile'] for i in facts['gpufleet_gpus'][0]['mig']['instances']] == ['3g.20gb', '2g.10gb', '1g.5gb', '1g.5gb']
    assert facts['gpufleet_gpus'][1]['mig']['change_pending'] is True
    profiles_off = run_module('gpu_facts', {'nvidia_smi_path': path, 'gather_profiles': False}, tmp_path, env=env)
    assert profiles_off['ansible_facts']['gpufleet_nvidia_smi_calls'] == 5


def test_without_processes_one_call_less_unless_mig_is_enabled(tmp_path):
    path, env = make_fake(tmp_path, h200_answers())
    full = run_module('gpu_facts', {'nvidia_smi_path': path, 'gather_profiles': False}, tmp_path, env=env)
    lean = run_module('gpu_facts', {'nvidia_smi_path': path, 'gather_profiles': False, 'gather_processes': False},
                      tmp_path, env=env)
    assert full['ansible_facts']['gpufleet_nvidia_smi_calls'] == 2 and lean['ansible_facts']['gpufleet_nvidia_smi_calls'] == 1
    assert full['ansible_facts']['gpufleet_gpus'][0]['processes'] == []
    assert lean['ansible_facts']['gpufleet_gpus'][0]['processes'] is None  # not gathered, not "none running"
    without = dict(full['ansible_facts']['gpufleet_gpus'][0], processes=None)
    assert lean['ansible_facts']['gpufleet_gpus'][0] == without
    a100 = os.path.join(FIXTURES, 'a100-mig')
    answers = {}
    for key, name in (('query', 'query.txt'), ('summary', 'smi.txt'), ('-L', 'L.txt'), ('mig -lgi', 'lgi.txt'), ('mig -lci', 'lci.txt')):
        with open(os.path.join(a100, name)) as handle:
            answers[key] = [handle.read(), 0]
    mig_dir = tmp_path / 'mig'
    mig_dir.mkdir()
    path, env = make_fake(mig_dir, answers)
    mig = run_module('gpu_facts', {'nvidia_smi_path': path, 'gather_profiles': False, 'gather_processes': False}, mig_dir, env=env)
    assert mig['ansible_facts']['gpufleet_nvidia_smi_calls'] == 5  # MIG on: the table names the MIG devices
    assert mig['ansible_facts']['gpufleet_gpus'][0]['processes'] is not None


def test_missing_nvidia_smi_is_not_a_failure(tmp_path):
    result = run_module('gpu_facts', {'nvidia_smi_path': str(tmp_path / 'absent')}, tmp_path)
    # An explicit path that does not exist: run_command fails to exec it -> a clear failure.
    assert result['failed']
    result = run_module('gpu_facts', {}, tmp_path, env={'PATH': str(tmp_path)})
    if result['ansible_facts']['gpufleet_gpus_reason'].startswith('nvidia-smi was not found'):
        assert result['ansible_facts']['gpufleet_gpus'] == []
    strict = run_module('gpu_facts', {'fail_on_missing': True}, tmp_path, env={'PATH': str(tmp_path)})
    if not os.path.exists('/usr/bin/nvidia-smi'):
        assert strict['failed'] and 'not found' in strict['msg']


def test_no_devices_is_empty_with_reason(tmp_path):
    path, env = make_fake(tmp_path, {'query': ['No devices were found\n', 6]})
    result = run_module('gpu_facts', {'nvidia_smi_path': path}, tmp_path, env=env)
    assert result['ansible_facts']['gpufleet_gpus'] == []
    assert 'No devices were found' in result['ansible_facts']['gpufleet_gpus_reason']


def test_driver_error_fails_with_output(tmp_path):
    message = ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
               "Make sure that the latest NVIDIA driver is installed and running.\n")
    path, env = make_fake(tmp_path, {'query': [message, 9]})
    result = run_module('gpu_facts', {'nvidia_smi_path': path}, tmp_path, env=env)
    assert result['failed'] and "couldn't communicate with the NVIDIA driver" in result['msg']


@pytest.mark.parametrize('key', ['summary', 'mig -lgip'])
def test_later_call_failure_fails(tmp_path, key):
    answers = h200_answers()
    answers[key] = ['Unknown Error\n', 255]
    path, env = make_fake(tmp_path, answers)
    result = run_module('gpu_facts', {'nvidia_smi_path': path}, tmp_path, env=env)
    assert result['failed'] and 'Unknown Error' in result['msg']


def test_read_files_returns_text_and_mode_in_the_same_run(tmp_path):
    present = tmp_path / 'config.yaml'
    present.write_text('version: v1\n')
    os.chmod(present, 0o640)
    path, env = make_fake(tmp_path, h200_answers())
    result = run_module('gpu_facts', {'nvidia_smi_path': path, 'gather_profiles': False,
                                      'read_files': [str(present), str(tmp_path / 'absent.conf')]}, tmp_path, env=env)
    assert not result.get('failed'), result
    assert result['files'] == {str(present): {'content': 'version: v1\n', 'mode': 0o640},
                               str(tmp_path / 'absent.conf'): {'content': None, 'mode': None}}
    assert result['ansible_facts']['gpufleet_gpus']


def test_read_files_refuses_relative_paths(tmp_path):
    result = run_module('gpu_facts', {'read_files': ['etc/x.conf']}, tmp_path)
    assert result['failed'] and 'read_files' in result['msg'] and 'etc/x.conf' in result['msg']


BARRIER = r'''#!/usr/bin/env python3
import json, os, sys, time
args = sys.argv[1:]
answers = json.load(open(os.environ['FAKE_SMI_ANSWERS']))
if args and args[0].startswith('--query-gpu'):
    sys.stdout.write(answers['query'][0])
    sys.exit(0)
# Every call after the query waits until all of them have started: run one after the other, the
# first would wait for the others in vain.
barrier = os.environ['FAKE_SMI_BARRIER']
open(os.path.join(barrier, '%d' % os.getpid()), 'w').close()
deadline = time.monotonic() + float(os.environ['FAKE_SMI_WAIT'])
while len(os.listdir(barrier)) < int(os.environ['FAKE_SMI_CALLS']):
    if time.monotonic() > deadline:
        sys.stderr.write('only %d of the calls started\n' % len(os.listdir(barrier)))
        sys.exit(42)
    time.sleep(0.01)
key = ' '.join(args) or 'summary'
sys.stdout.write(answers[key][0])
sys.exit(answers[key][1])
'''


def test_the_calls_after_the_query_run_at_the_same_time(tmp_path):
    """On a real host each nvidia-smi call waits on the driver (0.1 s to seconds on eight GPUs); the
    calls that only depend on the query run together, so a host's read lasts two calls, not seven."""
    a100 = os.path.join(FIXTURES, 'a100-mig')
    answers = {}
    for key, name in (('query', 'query.txt'), ('summary', 'smi.txt'), ('-L', 'L.txt'), ('mig -lgi', 'lgi.txt'),
                      ('mig -lci', 'lci.txt'), ('mig -lgip', 'lgip.txt'), ('mig -lgipp', 'lgipp.txt')):
        with open(os.path.join(a100, name)) as handle:
            answers[key] = [handle.read(), 0]
    fake = tmp_path / 'nvidia-smi'
    fake.write_text(BARRIER)
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    (tmp_path / 'answers.json').write_text(json.dumps(answers))
    (tmp_path / 'barrier').mkdir()
    env = {'FAKE_SMI_ANSWERS': str(tmp_path / 'answers.json'), 'FAKE_SMI_BARRIER': str(tmp_path / 'barrier'),
           'FAKE_SMI_CALLS': '6', 'FAKE_SMI_WAIT': '20'}
    result = run_module('gpu_facts', {'nvidia_smi_path': str(fake)}, tmp_path, env=env)
    assert not result.get('failed'), result
    facts = result['ansible_facts']
    assert facts['gpufleet_nvidia_smi_calls'] == 7
    assert [i['profile'] for i in facts['gpufleet_gpus'][0]['mig']['instances']] == ['3g.20gb', '2g.10gb', '1g.5gb', '1g.5gb']
    (tmp_path / 'barrier-2').mkdir()
    short = dict(env, FAKE_SMI_BARRIER=str(tmp_path / 'barrier-2'), FAKE_SMI_CALLS='7', FAKE_SMI_WAIT='1')
    waited = run_module('gpu_facts', {'nvidia_smi_path': str(fake)}, tmp_path, env=short)
    assert waited['failed'] and 'exit code 42' in waited['msg'], waited  # a call that fails still says so
