"""The mig_plan module end to end (as Ansible runs it)."""
import pytest

from module_runner import run_module


def test_accepts_issue_example(tmp_path):
    result = run_module('mig_plan', {'gpu': 'A100-40GB', 'layout': {'4g.20gb': 1, '3g.20gb': 1}}, tmp_path)
    assert not result.get('failed'), result
    assert result['changed'] is False
    assert result['plan']['placements'] == [
        {'profile': '4g.20gb', 'start': 0, 'size': 4}, {'profile': '3g.20gb', 'start': 4, 'size': 4}]
    assert result['model']['key'] == 'A100-40GB'


def test_rejects_with_reason(tmp_path):
    result = run_module('mig_plan', {'gpu': 'A100-40GB', 'layout': {'4g.20gb': 2}}, tmp_path)
    assert result['failed']
    assert 'allows at most 1 4g.20gb instance' in result['msg']
    assert result['problems']


@pytest.mark.parametrize('gpu, good, bad', [
    ('A30', {'2g.12gb': 1, '1g.6gb': 2}, {'2g.12gb': 3}),
    ('NVIDIA H100 80GB HBM3', {'3g.40gb': 1, '4g.40gb': 1}, {'4g.40gb': 2}),
    ('0x233510DE', {'1g.18gb': 7}, {'1g.18gb': 8}),
    ('B200', {'7g.180gb': 1}, {'7g.180gb': 1, '1g.23gb': 1}),
    ('0x294110DE', {'1g.23gb': 2, '2g.47gb': 1, '3g.93gb': 1}, {'3g.93gb': 3}),
    ('B300', {'1g.34gb+me': 1, '1g.34gb': 6}, {'1g.34gb+me': 2}),
    ('NVIDIA GB300', {'7g.278gb': 1}, {'1g.35gb+me': 2}),  # one +me: mig-parted 75449116 (issue 25 §3)
    ('0x294110DE', {'3g.95gb': 2}, {'3g.95gb': 1, '3g.93gb': 1}),  # one naming per board (issue 25 §3)
    ('NVIDIA RTX PRO 6000 Blackwell Server Edition', {'1g.24gb+gfx': 4}, {'2g.48gb': 1, '1g.24gb+me.all': 1}),
    ('0x2BB110DE', {'2g.48gb-me': 1, '2g.48gb+me.all': 1}, {'4g.96gb': 1, '1g.24gb': 1}),
    ('A30', {'2g.12gb+me': 1, '1g.6gb': 2}, {'2g.12gb+me': 1, '1g.6gb+me': 1}),
])
def test_every_model_kind(tmp_path, gpu, good, bad):
    assert not run_module('mig_plan', {'gpu': gpu, 'layout': good}, tmp_path).get('failed')
    assert run_module('mig_plan', {'gpu': gpu, 'layout': bad}, tmp_path)['failed']


def test_compute_instance_profile_is_refused_with_the_reason(tmp_path):
    result = run_module('mig_plan', {'gpu': 'H100-80GB', 'layout': {'1c.3g.40gb': 1}}, tmp_path)
    assert result['failed']
    assert 'is a compute-instance profile' in result['msg']


def test_unknown_gpu(tmp_path):
    result = run_module('mig_plan', {'gpu': 'Tesla T4', 'layout': {}}, tmp_path)
    assert result['failed'] and 'known models' in result['msg']


def test_check_mode_same_answer(tmp_path):
    args = {'gpu': 'H200', 'layout': {'3g.71gb': 2}}
    assert run_module('mig_plan', args, tmp_path, check_mode=True)['plan'] == run_module('mig_plan', args, tmp_path)['plan']


def test_mig_parted_config(tmp_path):
    config = {'version': 'v1', 'mig-configs': {'mixed-fleet': [
        {'device-filter': '0x233010DE', 'devices': 'all', 'mig-enabled': True, 'mig-devices': {'1g.10gb': 7}},
        {'device-filter': ['0x20B010DE', '0x20B110DE'], 'devices': [0, 1], 'mig-enabled': True,
         'mig-devices': {'3g.20gb': 2}},
        {'device-filter': '0x233510DE', 'devices': 'all', 'mig-enabled': False},
    ]}}
    result = run_module('mig_plan', {'config': config, 'name': 'mixed-fleet'}, tmp_path)
    assert not result.get('failed'), result
    assert [(p['model'], p['item']) for p in result['plans']] == [('H100-80GB', 0), ('A100-40GB', 1), ('H200', 2)]
    assert result['plans'][2]['plan'] is None
    restricted = run_module('mig_plan', {'config': config, 'name': 'mixed-fleet', 'gpu': 'A100-40GB'}, tmp_path)
    assert [p['item'] for p in restricted['plans']] == [1]


def test_mig_parted_config_errors(tmp_path):
    config = {'version': 'v1', 'mig-configs': {'bad': [
        {'device-filter': '0x233010DE', 'devices': 'all', 'mig-enabled': True, 'mig-devices': {'1g.5gb': 1}}]}}
    result = run_module('mig_plan', {'config': config}, tmp_path)
    assert result['failed'] and "mig-configs.bad[0] on H100-80GB: profile '1g.5gb'" in result['msg']
    result = run_module('mig_plan', {'config': {'version': 'v2', 'mig-configs': {}}}, tmp_path)
    assert result['failed'] and 'invalid mig-parted config' in result['msg']
    result = run_module('mig_plan', {'config': config, 'name': 'other'}, tmp_path)
    assert result['failed'] and 'other' in result['msg']


def test_argument_errors(tmp_path):
    assert run_module('mig_plan', {'layout': {'1g.10gb': 1}}, tmp_path)['failed']
    assert run_module('mig_plan', {'gpu': 'H200'}, tmp_path)['failed']


def test_default_configs(tmp_path):
    result = run_module('mig_plan', {'gpu': 'H100-NVL', 'name': 'all-balanced', 'include_default_configs': True}, tmp_path)
    assert not result.get('failed'), result
    assert result['plans'][0]['plan']['layout'] == {'1g.12gb': 2, '2g.24gb': 1, '3g.47gb': 1}
    result = run_module('mig_plan', {'gpu': 'A30', 'name': 'all-1g.10gb', 'include_default_configs': True}, tmp_path)
    assert result['failed'] and 'no item of mig-parted config all-1g.10gb applies to A30' in result['msg']
    own = {'version': 'v1', 'mig-configs': {'all-balanced': [{'devices': 'all', 'mig-enabled': False}]}}
    result = run_module('mig_plan', {'gpu': 'H200', 'config': own, 'name': 'all-balanced',
                                     'include_default_configs': True}, tmp_path)
    assert result['plans'][0]['mig_enabled'] is False
    result = run_module('mig_plan', {'gpu': 'H200', 'name': 'all-balanced'}, tmp_path)
    assert result['failed'] and 'include_default_configs' in result['msg']


def test_two_media_extension_instances_on_an_a30(tmp_path):
    """docs/reference/specs.md §2.16: the A30 has one JPEG decoder and one OFA (MIG user guide, A30 table)."""
    result = run_module('mig_plan', {'gpu': 'A30', 'layout': {'1g.6gb+me': 1, '2g.12gb+me': 1}}, tmp_path)
    assert result['failed']
    assert 'needs 2 JPEG decoders but A30 has 1' in result['msg']
    good = run_module('mig_plan', {'gpu': 'A30', 'layout': {'1g.6gb+me': 1}}, tmp_path)
    assert good['model']['engines'] == {'decoders': 4, 'jpeg': 1, 'ofa': 1}
    assert good['model']['architecture'] == 'ampere'
