"""nvidia-smi parsers on the real H200 capture and on written MIG fixtures."""
import os

import pytest

from ansible_collections.gpufleet.sharing.plugins.module_utils.gpu._nvidia_smi import (
    ParseError,
    build_gpu_facts,
    commands_for,
    layout_of,
    parse_compute_instances,
    parse_gpu_instance_placements,
    parse_gpu_instance_profiles,
    parse_gpu_instances,
    parse_list_gpus,
    parse_query_gpus,
    parse_summary,
)

FIXTURES = os.path.join(os.path.dirname(__file__), '..', '..', '..', 'fixtures')


def capture(name):
    """A file of the real H200 capture without its '$ command' and '[rc=N]' lines."""
    with open(os.path.join(FIXTURES, 'h200', name)) as handle:
        lines = handle.read().splitlines()
    return '\n'.join(l for l in lines if not l.startswith('$ ') and not l.startswith('[rc=')) + '\n'


def fixture(name):
    with open(os.path.join(FIXTURES, 'a100-mig', name)) as handle:
        return handle.read()


def h200_query_nounits():
    """The capture's query with only the fields the module asks for, as csv,noheader,nounits."""
    header, row = capture('query.txt').splitlines()[:2]
    values = dict(zip([h.split(' [')[0] for h in header.split(', ')], row.split(', ')))
    fields = ['index', 'name', 'uuid', 'pci.bus_id', 'pci.device_id', 'memory.total',
              'mig.mode.current', 'mig.mode.pending', 'driver_version']
    return ', '.join(values[f].replace(' MiB', '') for f in fields) + '\n'


def test_query_from_h200_capture():
    rows = parse_query_gpus(h200_query_nounits())
    assert rows == [{
        'index': 0, 'name': 'NVIDIA H200', 'uuid': 'GPU-163e5d76-4ee1-1290-9652-cc41f8103e00',
        'pci_bus_id': '00000000:00:06.0', 'pci_device_id': '0x233510DE', 'memory_total_mib': 143771,
        'driver_version': '580.159.04', 'mig_current': False, 'mig_pending': False}]


def test_query_tolerates_header_and_units():
    text = ('index, name, uuid, pci.bus_id, pci.device_id, memory.total [MiB], mig.mode.current, '
            'mig.mode.pending, driver_version\n'
            '0, NVIDIA A2, GPU-aaaa, 00000000:08:00.0, 0x25B610DE, 15356 MiB, [N/A], [N/A], 535.104.05\n')
    rows = parse_query_gpus(text)
    assert rows[0]['memory_total_mib'] == 15356
    assert rows[0]['mig_current'] is None and rows[0]['mig_pending'] is None


@pytest.mark.parametrize('text', [
    '0, NVIDIA H200, GPU-x\n',
    'zero, NVIDIA H200, GPU-x, b, 0x1, 1, Disabled, Disabled, 1\n',
    '0, NVIDIA H200, GPU-x, b, 0x1, 1, Maybe, Disabled, 1\n',
])
def test_query_rejects_garbage(text):
    with pytest.raises(ParseError):
        parse_query_gpus(text)


def test_list_gpus_h200():
    assert parse_list_gpus(capture('smi_L.txt')) == [{
        'index': 0, 'name': 'NVIDIA H200', 'uuid': 'GPU-163e5d76-4ee1-1290-9652-cc41f8103e00',
        'mig_devices': []}]


def test_list_gpus_with_mig_and_legacy_uuids():
    gpus = parse_list_gpus(fixture('L.txt'))
    assert [d['profile'] for d in gpus[0]['mig_devices']] == ['3g.20gb', '2g.10gb', '1g.5gb', '1g.5gb']
    assert gpus[0]['mig_devices'][3] == {'profile': '1g.5gb', 'device': 3,
                                         'uuid': 'MIG-11111111-2222-5333-8444-555555555503'}
    legacy = parse_list_gpus('GPU 0: A100-SXM4-40GB (UUID: GPU-0069414c-9f30-41f9-d5d8-87890423f0c4)\n'
                             '  MIG 1g.5gb Device 0: (UUID: MIG-GPU-0069414c-9f30-41f9-d5d8-87890423f0c4/7/0)\n')
    assert legacy[0]['mig_devices'][0]['uuid'] == 'MIG-GPU-0069414c-9f30-41f9-d5d8-87890423f0c4/7/0'
    assert parse_list_gpus('No devices were found\n') == []
    with pytest.raises(ParseError):
        parse_list_gpus('something else entirely\n')


def test_profiles_h200_capture():
    profiles = parse_gpu_instance_profiles(capture('mig_lgip.txt'))[0]
    assert [(p['name'], p['gi_profile_id'], p['instances_free'], p['instances_total']) for p in profiles] == [
        ('1g.18gb', 19, 7, 7), ('1g.18gb+me', 20, 1, 1), ('1g.35gb', 15, 4, 4), ('2g.35gb', 14, 3, 3),
        ('3g.71gb', 9, 2, 2), ('4g.71gb', 5, 1, 1), ('7g.141gb', 0, 1, 1)]
    assert profiles[-1]['memory_gib'] == 140.0
    assert profiles[-1]['multiprocessors'] == 132
    assert profiles[-1]['copy_engines'] == 8


def test_profiles_narrow_table_and_messages():
    profiles = parse_gpu_instance_profiles(fixture('lgip.txt'))
    assert sorted(profiles) == [0, 1]
    assert profiles[0][0]['instances_free'] == 0 and profiles[1][0]['instances_free'] == 7
    assert parse_gpu_instance_profiles('No MIG-supported devices found.\n') == {}


def test_placements_h200_capture():
    placements = parse_gpu_instance_placements(capture('mig_lgipp.txt'))
    assert placements == {0: {19: ((0, 1, 2, 3, 4, 5, 6), 1), 20: ((0, 1, 2, 3, 4, 5, 6), 1),
                              15: ((0, 2, 4, 6), 2), 14: ((0, 2, 4), 2), 9: ((0, 4), 4),
                              5: ((0,), 4), 0: ((0,), 8)}}


def test_gpu_instances():
    instances = parse_gpu_instances(fixture('lgi.txt'))
    assert [(i['profile'], i['gi_id'], i['start'], i['size']) for i in instances] == [
        ('1g.5gb', 7, 0, 1), ('1g.5gb', 8, 1, 1), ('2g.10gb', 3, 2, 2), ('3g.20gb', 2, 4, 4)]
    assert parse_gpu_instances(capture('mig_lgi.txt')) == []
    assert parse_gpu_instances('No GPU instances found.\n') == []


@pytest.mark.parametrize('name', ['lci.txt', 'lci_old.txt'])
def test_compute_instances_new_and_old_format(name):
    instances = parse_compute_instances(fixture(name))
    assert [(c['gi_id'], c['profile'], c['ci_id']) for c in instances] == [
        (7, '1g.5gb', 0), (8, '1g.5gb', 0), (3, '2g.10gb', 0), (2, '3g.20gb', 0)]
    if name == 'lci_old.txt':
        assert instances[0]['start'] is None


def test_summary_h200_no_processes():
    summary = parse_summary(capture('smi.txt'))
    assert summary == {'mig_devices': [], 'processes': []}


def test_summary_with_mig_devices_and_processes():
    summary = parse_summary(fixture('smi.txt'))
    assert summary['mig_devices'] == [
        {'gpu': 0, 'gi_id': 2, 'ci_id': 0, 'device': 0}, {'gpu': 0, 'gi_id': 3, 'ci_id': 0, 'device': 1},
        {'gpu': 0, 'gi_id': 7, 'ci_id': 0, 'device': 2}, {'gpu': 0, 'gi_id': 8, 'ci_id': 0, 'device': 3}]
    assert summary['processes'] == [
        {'gpu': 0, 'gi_id': 7, 'ci_id': 0, 'pid': 41822, 'type': 'C', 'name': 'python serve.py',
         'used_memory_mib': 2088},
        {'gpu': 1, 'gi_id': None, 'ci_id': None, 'pid': 41907, 'type': 'C', 'name': '/usr/bin/python3',
         'used_memory_mib': 5990}]


def test_commands_for():
    h200 = parse_query_gpus(h200_query_nounits())
    assert commands_for(h200) == [('mig', '-lgip'), ('mig', '-lgipp')]
    a100 = parse_query_gpus(fixture('query.txt'))
    assert commands_for(a100) == [('-L',), ('mig', '-lgi'), ('mig', '-lci'), ('mig', '-lgip'), ('mig', '-lgipp')]
    no_mig = [dict(h200[0], mig_current=None, mig_pending=None)]
    assert commands_for(no_mig) == []


def test_facts_h200_exact():
    facts = build_gpu_facts(
        parse_query_gpus(h200_query_nounits()), parse_summary(capture('smi.txt')),
        profiles=parse_gpu_instance_profiles(capture('mig_lgip.txt')),
        placements=parse_gpu_instance_placements(capture('mig_lgipp.txt')))
    assert len(facts) == 1
    gpu = facts[0]
    assert {k: gpu[k] for k in ('index', 'name', 'uuid', 'pci_bus_id', 'pci_device_id',
                                'memory_total_mib', 'driver_version')} == {
        'index': 0, 'name': 'NVIDIA H200', 'uuid': 'GPU-163e5d76-4ee1-1290-9652-cc41f8103e00',
        'pci_bus_id': '00000000:00:06.0', 'pci_device_id': '0x233510DE', 'memory_total_mib': 143771,
        'driver_version': '580.159.04'}
    assert gpu['mig'] == {'capable': True, 'current': False, 'pending': False, 'change_pending': False,
                          'instances': []}
    assert gpu['processes'] == []
    assert [p['name'] for p in gpu['supported_profiles']] == [
        '1g.18gb', '1g.18gb+me', '1g.35gb', '2g.35gb', '3g.71gb', '4g.71gb', '7g.141gb']
    assert gpu['supported_profiles'][4]['placements'] == [{'start': 0, 'size': 4}, {'start': 4, 'size': 4}]


def test_facts_a100_with_mig_and_processes():
    facts = build_gpu_facts(
        parse_query_gpus(fixture('query.txt')), parse_summary(fixture('smi.txt')),
        list_gpus=parse_list_gpus(fixture('L.txt')),
        gpu_instances=parse_gpu_instances(fixture('lgi.txt')),
        compute_instances=parse_compute_instances(fixture('lci.txt')),
        profiles=parse_gpu_instance_profiles(fixture('lgip.txt')),
        placements=parse_gpu_instance_placements(fixture('lgipp.txt')))
    gpu0, gpu1 = facts
    assert layout_of(gpu0) == {'1g.5gb': 2, '2g.10gb': 1, '3g.20gb': 1}
    three_g = [i for i in gpu0['mig']['instances'] if i['profile'] == '3g.20gb'][0]
    assert three_g['gi_id'] == 2 and three_g['placement'] == {'start': 4, 'size': 4}
    assert three_g['uuid'] == 'MIG-11111111-2222-5333-8444-555555555500'
    assert three_g['compute_instances'][0]['device'] == 0
    assert gpu0['processes'][0]['pid'] == 41822
    assert gpu0['processes'][0]['mig_device_uuid'] == 'MIG-11111111-2222-5333-8444-555555555502'
    assert gpu1['mig'] == {'capable': True, 'current': False, 'pending': True, 'change_pending': True,
                           'instances': []}
    assert gpu1['processes'][0]['pid'] == 41907 and gpu1['processes'][0]['mig_device_uuid'] is None
