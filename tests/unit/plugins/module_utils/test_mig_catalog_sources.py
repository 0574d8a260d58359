"""Catalog facts added or corrected for issue 12, each pinned to the public source it comes from.

Sources are the tags of docs/reference/specs.md §0 (S1 MIG user guide profile tables, S3 its
supported-GPU list, S4 mig-parted config-default.yaml, S9 real nvidia-smi output in public GitHub
threads, S11 pci.ids); the section named in each test holds the table.
"""
import pytest

from ansible_collections.gpufleet.sharing.plugins.module_utils.mig import _mig_planner
from ansible_collections.gpufleet.sharing.plugins.module_utils.gpu._mig_catalog import (
    find_model,
    resolve_model,
)
from ansible_collections.gpufleet.sharing.plugins.module_utils.mig._mig_parted import default_configs, parse_config, plan_items
from ansible_collections.gpufleet.sharing.plugins.module_utils.mig._mig_planner import check_layout, plan_layout


def _table(key):
    model = resolve_model(key)
    return [(p.name, p.gi_profile_id, p.max_instances, p.memory_slices, p.compute_slices) for p in model.profiles]


@pytest.mark.parametrize('pci, key', [
    ('0x294110DE', 'GB200'),          # S11 "GB100 [HGX GB200]", S4 all-balanced filter (specs §6.6)
    ('0x318210DE', 'B300'),           # S11 "GB110 [B300 SXM6 AC]" (specs §6.6)
    ('0x31C210DE', 'GB300'),          # S11 "GB110 [GB300]" (specs §6.6)
    ('0x2BB510DE', 'RTX-PRO-6000'),   # S11 "GB202GL [RTX PRO 6000 Blackwell Server Edition]"
    ('0x2BB110DE', 'RTX-PRO-6000'),   # S11 "GB202GL [RTX PRO 6000 Blackwell Workstation Edition]"
    ('0x20B610DE', 'PG506-96GB'),     # S11 "GA100GL [PG506-232]" (specs §2.12)
])
def test_pci_ids_of_the_new_models(pci, key):
    assert find_model('', pci).key == key


@pytest.mark.parametrize('name, key', [
    ('NVIDIA RTX PRO 6000 Blackwell Server Edition', 'RTX-PRO-6000'),
    ('NVIDIA RTX PRO 6000 Blackwell Workstation Edition', 'RTX-PRO-6000'),
    ('NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition', 'RTX-PRO-6000'),
    ('NVIDIA GB200', 'GB200'),
    ('NVIDIA GB300', 'GB300'),
    ('NVIDIA B300 SXM6 AC', 'B300'),
])
def test_product_names_of_the_new_models(name, key):
    """S3 lists the RTX PRO 6000 Blackwell Server, Workstation and Max-Q Workstation editions."""
    assert find_model(name).key == key


def test_pg506_is_ampere_but_keeps_the_96gb_profile_names():
    """S11: 0x20B6 is a GA100GL (Ampere). S4 files it with the 96GB Hopper parts in all-balanced
    (specs §6.5), so its profile names are those of H100-96GB and the default configs keep one item
    for both (specs §2.12)."""
    pg506 = resolve_model('0x20B610DE')
    assert pg506.architecture == 'ampere'
    assert pg506.mig_mode_persists_across_reboot
    assert not resolve_model('H100-96GB').mig_mode_persists_across_reboot
    assert '0x20B610DE' not in resolve_model('H100-96GB').pci_device_ids
    assert pg506.profile_names() == resolve_model('H100-96GB').profile_names()
    balanced = default_configs()['all-balanced']
    item, = [i for i in balanced if '0x20B610DE' in i['device-filter']]
    assert {'0x233D10DE', '0x234210DE', '0x232910DE', '0x20B610DE'} <= set(item['device-filter'])
    assert item['mig-devices'] == {'1g.12gb': 2, '2g.24gb': 1, '3g.48gb': 1}


def test_gb200_profiles():
    """S4 config-default.yaml names (all-1g.23gb ... all-7g.186gb); IDs and counts of the 1g/2g rows
    from the real GB200 -lgip in S9 mig-parted#227; the rest DERIVED (specs §2.13). Boards of the
    earlier -lgip (S9 gpu-operator#1303, mig-parted 89dd81a3) print 1g.24gb, 1g.24gb+me, 3g.95gb,
    4g.95gb and 7g.189gb for the same ids, and S4 v0.15.0 still lists all-3g.95gb, all-4g.95gb and
    all-7g.189gb (issue 25 §3): both namings are GB200's, one board prints one of them."""
    assert _table('GB200') == [
        ('1g.23gb', 19, 7, 1, 1), ('1g.23gb+me', 20, 1, 1, 1), ('1g.47gb', 15, 4, 2, 1),
        ('2g.47gb', 14, 3, 2, 2), ('3g.93gb', 9, 2, 4, 3), ('4g.93gb', 5, 1, 4, 4), ('7g.186gb', 0, 1, 8, 7),
        ('1g.24gb', 19, 7, 1, 1), ('1g.24gb+me', 20, 1, 1, 1), ('3g.95gb', 9, 2, 4, 3), ('4g.95gb', 5, 1, 4, 4),
        ('7g.189gb', 0, 1, 8, 7)]
    model = resolve_model('GB200')
    assert model.namings == (('1g.23gb', '1g.23gb+me', '3g.93gb', '4g.93gb', '7g.186gb'),
                             ('1g.24gb', '1g.24gb+me', '3g.95gb', '4g.95gb', '7g.189gb'))
    assert model.profile('1g.24gb').memory_gib == 20.00  # gpu-operator#1303 -lgip
    plan_layout(model, {'1g.24gb': 2, '2g.47gb': 1, '3g.95gb': 1})
    problems = check_layout(model, {'3g.93gb': 1, '3g.95gb': 1})
    assert len(problems) == 1 and 'mixes profile names of two kinds of GB200 board (3g.93gb and 3g.95gb)' in problems[0]
    assert [p.multiprocessors for p in model.profiles[:4]] == [18, 18, 32, 38]
    assert not model.verified_placements
    assert model.balanced == {'1g.23gb': 2, '2g.47gb': 1, '3g.93gb': 1}  # S4 all-balanced 0x294110DE


def test_b300_profiles():
    """S4 config-default.yaml (all-1g.34gb ... all-7g.269gb, all-balanced 0x318210DE); 1g.34gb+me from
    the GPU Operator release notes for HGX B300 as quoted by third parties (UNCERTAIN source, specs §2.14)."""
    assert [p.name for p in resolve_model('B300').profiles] == [
        '1g.34gb', '1g.34gb+me', '1g.67gb', '2g.67gb', '3g.135gb', '4g.135gb', '7g.269gb']
    assert [p.max_instances for p in resolve_model('B300').profiles] == [7, 1, 4, 3, 2, 1, 1]
    assert resolve_model('B300').balanced == {'1g.34gb': 2, '2g.67gb': 1, '3g.135gb': 1}


def test_gb300_profiles_include_the_media_extension():
    """S4 v0.15.0 config-default.yaml has all-1g.35gb.me (1g.35gb+me: 1), added by mig-parted 75449116
    "add the mig profiles for GB300"; the GPU Operator v26.7.0 MIG manager ConfigMap has it too
    (issue 25 §3, specs §2.14)."""
    model = resolve_model('GB300')
    assert model.profile_names() == ['1g.35gb', '1g.35gb+me', '1g.70gb', '2g.70gb', '3g.139gb', '4g.139gb', '7g.278gb']
    assert model.profile('1g.35gb+me').engines == (1, 1, 1) and model.profile('1g.35gb+me').max_instances == 1
    assert model.balanced == {'1g.35gb': 2, '2g.70gb': 1, '3g.139gb': 1}
    assert model.architecture == 'blackwell'


def test_rtx_pro_6000_profiles():
    """IDs, maxima, GiB and SMs from the RTX PRO 6000 Blackwell -lgip in S9 (specs §2.15); 4 memory and
    4 compute slices, at most 4 instances (S3); placements DERIVED."""
    assert _table('RTX-PRO-6000') == [
        ('1g.24gb', 14, 4, 1, 1), ('1g.24gb+me', 21, 1, 1, 1), ('1g.24gb+gfx', 47, 4, 1, 1),
        ('1g.24gb+me.all', 65, 1, 1, 1), ('1g.24gb-me', 67, 4, 1, 1), ('2g.48gb', 5, 2, 2, 2),
        ('2g.48gb+gfx', 35, 2, 2, 2), ('2g.48gb+me.all', 64, 1, 2, 2), ('2g.48gb-me', 66, 2, 2, 2),
        ('4g.96gb', 0, 1, 4, 4), ('4g.96gb+gfx', 32, 1, 4, 4)]
    model = resolve_model('RTX-PRO-6000')
    assert (model.memory_slices, model.compute_slices, model.max_instances) == (4, 4, 4)
    assert model.engine_totals == (4, 4, 1)
    assert model.profile('1g.24gb+me.all').engines == (4, 4, 1)
    assert model.profile('1g.24gb-me').engines == (0, 0, 0)
    assert not model.verified_placements
    assert model.balanced == {'1g.24gb': 2, '2g.48gb': 1}  # S4 all-balanced 0x2BB510DE


def test_rtx_pro_6000_default_config_names():
    """S4 spells the variants in config names as .gfx, .me.all and -me (specs §6.5)."""
    names = set(default_configs())
    assert {'all-1g.24gb.gfx', 'all-1g.24gb.me.all', 'all-1g.24gb-me', 'all-2g.48gb.me.all',
            'all-4g.96gb.gfx'} <= names


def test_a30_has_one_jpeg_and_one_ofa():
    """S1 A30 table: the whole GPU (4g.24gb) has 4 NVDECs / 1 JPEG / 1 OFA, and 1g.6gb+me and 2g.12gb+me
    each take 1 JPEG and 1 OFA, so two +me instances cannot coexist (specs §2.16)."""
    model = resolve_model('A30')
    assert model.engine_totals == (4, 1, 1)
    assert model.profile('1g.6gb+me').engines == (1, 1, 1)
    assert model.profile('2g.12gb+me').engines == (2, 1, 1)
    problems = check_layout(model, {'1g.6gb+me': 1, '2g.12gb+me': 1})
    assert any('needs 2 JPEG decoders but A30 has 1' in p for p in problems)
    assert any('needs 2 optical-flow accelerators (OFA) but A30 has 1' in p for p in problems)
    assert any('at most one instance with media extensions (+me)' in p for p in problems)
    plan_layout(model, {'2g.12gb+me': 1, '1g.6gb': 2})  # one +me is fine


def test_rtx_pro_6000_me_all_takes_every_media_engine():
    """S9 -lgip: +me.all takes all 4 decoders and JPEG units, so besides it only -me instances fit."""
    model = resolve_model('RTX-PRO-6000')
    plan_layout(model, {'1g.24gb+me.all': 1, '1g.24gb-me': 3})
    problems = check_layout(model, {'2g.48gb+me.all': 1, '1g.24gb': 1})
    assert any('needs 5 video decoders (NVDEC) but RTX-PRO-6000 has 4' in p for p in problems)
    assert any('shares the GPU only with -me instances' in p for p in problems)
    assert check_layout(model, {'1g.24gb+me': 1, '1g.24gb+me.all': 1})


@pytest.mark.parametrize('key', ['A30', 'A100-40GB', 'H100-80GB', 'H200', 'B200', 'GB200', 'B300', 'RTX-PRO-6000'])
def test_every_model_refuses_two_media_extension_instances(key):
    """The same rule on every model: the GPU has one OFA, and every +me profile takes it (S1, S9)."""
    model = resolve_model(key)
    media = [p for p in model.profiles if p.media_extensions]
    assert media and model.engine_totals[2] == 1
    for profile in media:
        assert profile.engines[2] == 1
    if len(media) > 1:
        assert check_layout(model, {media[0].name: 1, media[1].name: 1})


def test_compute_instance_profiles_are_refused_with_the_reason():
    problems = check_layout(resolve_model('H100-80GB'), {'1c.3g.40gb': 2})
    assert len(problems) == 1
    assert "'1c.3g.40gb' is a compute-instance profile (1c of the GPU instance 3g.40gb)" in problems[0]
    assert 'one compute instance spanning all of it' in problems[0]
    assert 'Use the GPU-instance profile (3g.40gb) instead' in problems[0]


def test_one_function_answers_what_a_node_advertises():
    """node_resources counted MIG-enabled GPUs as nothing under strategy none, whereas the device
    plugin advertises every physical GPU as nvidia.com/gpu there (specs §9.1); _sharing.expected_node
    is the one answer, so the planner no longer has its own."""
    assert not hasattr(_mig_planner, 'node_resources')


def test_mig_config_items_get_the_same_refusals():
    """mig_config and mig_plan plan mig-parted items through _mig_parted.plan_items (specs §6.1)."""
    config = parse_config({'version': 'v1', 'mig-configs': {
        'ci': [{'devices': 'all', 'mig-enabled': True, 'mig-devices': {'1c.3g.40gb': 2}}],
        'two-me': [{'device-filter': '0x20B710DE', 'devices': 'all', 'mig-enabled': True,
                    'mig-devices': {'1g.6gb+me': 1, '2g.12gb+me': 1}}]}})
    problems = plan_items('ci', config.items('ci'), resolve_model('H100-80GB'))[1]
    assert problems and 'is a compute-instance profile' in problems[0]
    problems = plan_items('two-me', config.items('two-me'), None)[1]
    assert any('on A30: the layout needs 2 JPEG decoders' in p for p in problems)
