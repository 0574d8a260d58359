"""The catalog: lookups, and its facts checked against the real H200 capture."""
import os

import pytest

from ansible_collections.gpufleet.sharing.plugins.module_utils.gpu._mig_catalog import (
    MODELS,
    CatalogError,
    find_model,
    normalize_pci_device_id,
    resolve_model,
)
from ansible_collections.gpufleet.sharing.plugins.module_utils.gpu._nvidia_smi import (
    parse_gpu_instance_placements,
    parse_gpu_instance_profiles,
)

FIXTURES = os.path.join(os.path.dirname(__file__), '..', '..', '..', 'fixtures')
REQUIRED_KEYS = ['A30', 'A100-40GB', 'A100-80GB', 'H100-80GB', 'H100-NVL', 'H100-96GB', 'PG506-96GB', 'H200',
                 'GH200-144GB', 'B200', 'GB200', 'B300', 'GB300', 'RTX-PRO-6000']


def _capture(name):
    with open(os.path.join(FIXTURES, 'h200', name)) as handle:
        lines = handle.read().splitlines()
    return '\n'.join(line for line in lines if not line.startswith('$ ') and not line.startswith('[rc='))


def test_every_required_model_is_present():
    assert [m.key for m in MODELS] == REQUIRED_KEYS


@pytest.mark.parametrize('identifier, key', [
    ('A100-40GB', 'A100-40GB'),
    ('a100-40gb', 'A100-40GB'),
    ('NVIDIA A100-SXM4-40GB', 'A100-40GB'),
    ('NVIDIA A100-PCIE-40GB', 'A100-40GB'),
    ('A100-SXM4-80GB', 'A100-80GB'),
    ('NVIDIA H100 80GB HBM3', 'H100-80GB'),
    ('nvidia h100 nvl', 'H100-NVL'),
    ('NVIDIA H200', 'H200'),
    ('NVIDIA H200 NVL', 'H200'),
    ('0x233510DE', 'H200'),
    ('0x233510de', 'H200'),
    ('233510DE', 'H200'),
    ('0x2330', 'H100-80GB'),
    ('0x20B710DE', 'A30'),
    ('NVIDIA GH200 144G HBM3e', 'GH200-144GB'),
    ('0x290110DE', 'B200'),
])
def test_find_model(identifier, key):
    assert find_model(identifier).key == key


def test_pci_id_wins_over_name():
    assert find_model('NVIDIA Something New', '0x233010DE').key == 'H100-80GB'
    assert find_model('NVIDIA H200', '0x20B010DE').key == 'A100-40GB'


@pytest.mark.parametrize('identifier', ['', 'Tesla T4', '0x1EB810DE', 'H300', 'nonsense'])
def test_unknown_models(identifier):
    assert find_model(identifier) is None
    with pytest.raises(CatalogError) as error:
        resolve_model(identifier)
    assert 'A100-40GB' in str(error.value)


def test_pci_id_normalization():
    assert normalize_pci_device_id('0x2330') == '0x233010DE'
    assert normalize_pci_device_id(' 233010de ') == '0x233010DE'
    assert normalize_pci_device_id('0x23301') is None
    assert normalize_pci_device_id('xyz') is None


def test_pci_ids_are_unique_across_models():
    seen = {}
    for model in MODELS:
        for pci in model.pci_device_ids:
            assert pci not in seen, '%s in %s and %s' % (pci, model.key, seen[pci])
            seen[pci] = model.key


@pytest.mark.parametrize('model', MODELS, ids=lambda m: m.key)
def test_model_geometry_is_consistent(model):
    names = [p.name for p in model.profiles]
    assert len(names) == len(set(names))
    # A board prints one name per GI profile id: the ids are unique within each naming (GB200 has two).
    other_names = [set(names) for names in model.namings]
    for naming in other_names or [set()]:
        board = [p for p in model.profiles if p.name in naming or not any(p.name in o for o in other_names)]
        ids = [p.gi_profile_id for p in board]
        assert len(ids) == len(set(ids))
    assert all(len(names) == len(model.namings[0]) for names in model.namings)
    for profile in model.profiles:
        assert profile.starts, profile
        assert max(profile.starts) + profile.memory_slices <= model.memory_slices
        assert profile.compute_slices <= model.compute_slices
        assert model.profile(profile.name) is profile
        assert model.profile('MIG ' + profile.name) is profile
        if not any(profile.name in names for names in model.namings[1:]):
            assert model.profile(str(profile.gi_profile_id)) is profile
        if profile.name.endswith('+me'):
            assert profile.max_instances == 1
    # The balanced layout of every model is itself valid and uses the model's own names.
    assert set(model.balanced) <= set(names)
    full = [p for p in model.profiles if p.memory_slices == model.memory_slices]
    assert full and all(p.compute_slices == model.compute_slices for p in full)
    # The whole GPU owns every media engine: no profile takes more than a full-GPU profile has.
    assert all(p.engines == model.engine_totals for p in full)


def test_h200_catalog_matches_the_real_capture():
    """The H200 entry must equal what a real H200 printed for -lgip and -lgipp."""
    model = resolve_model('H200')
    printed = parse_gpu_instance_profiles(_capture('mig_lgip.txt'))[0]
    placements = parse_gpu_instance_placements(_capture('mig_lgipp.txt'))[0]
    assert [p['name'] for p in printed] == [p.name for p in model.profiles]
    for row, profile in zip(printed, model.profiles):
        assert row['gi_profile_id'] == profile.gi_profile_id
        assert row['instances_total'] == profile.max_instances
        assert row['memory_gib'] == profile.memory_gib
        assert row['multiprocessors'] == profile.multiprocessors
        starts, size = placements[profile.gi_profile_id]
        assert starts == profile.starts
        assert size == profile.memory_slices


def test_ampere_persists_mig_mode_hopper_does_not():
    assert resolve_model('A100-40GB').mig_mode_persists_across_reboot
    assert resolve_model('A30').mig_mode_persists_across_reboot
    assert not resolve_model('H100-80GB').mig_mode_persists_across_reboot
    assert not resolve_model('H200').mig_mode_persists_across_reboot
    assert not resolve_model('B200').mig_mode_persists_across_reboot


def test_as_dict_is_json_ready():
    import json
    for model in MODELS:
        data = json.loads(json.dumps(model.as_dict()))
        assert data['key'] == model.key
        assert len(data['profiles']) == len(model.profiles)
