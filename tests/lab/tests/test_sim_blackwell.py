"""The RTX PRO 6000 Blackwell in the lab, and media engines as a limit on GPU instances
(docs/reference/specs.md §2.15, §2.16)."""

from __future__ import annotations

import importlib

import labtools
import pytest
import yaml

from gpulab import gpustate, migparted, smi
from gpulab.cluster.operator.migconfig import default_mig_parted_config
from gpulab.models import available_models, load_model

labtools.ensure_collection_path()
CATALOG = importlib.import_module("ansible_collections.gpufleet.sharing.plugins.module_utils.gpu._mig_catalog")
MIG_PARTED = importlib.import_module("ansible_collections.gpufleet.sharing.plugins.module_utils.mig._mig_parted")


def _profiles(path):
    return sorted(gi.profile for gi in gpustate.load(path).gpus[0].gpu_instances)


@pytest.mark.parametrize("key", available_models())
def test_lab_fixture_agrees_with_the_catalog(key):
    """Both come from the same published tables; the lab reads its own copy (it must not import the
    collection), so a disagreement here is a wrong fact on one side."""
    spec = load_model(key)
    if not spec.mig_capable:
        pytest.skip("not MIG-capable")
    model = CATALOG.resolve_model(spec.name, spec.pci_device_id)
    assert [p.name for p in spec.profiles] == model.profile_names()
    for lab, catalog in zip(spec.profiles, model.profiles):
        assert (lab.profile_id, lab.instances_total, lab.starts, lab.size) == (
            catalog.gi_profile_id, catalog.max_instances, catalog.starts, catalog.memory_slices)
        assert (lab.dec, lab.jpeg, lab.ofa) == catalog.engines


def test_rtx_pro_6000_lists_its_profiles(make_host):
    path = make_host([("RTX-PRO-6000", 1)])
    assert smi.run(["-mig", "1"], path)[0] == 0  # Blackwell: no reset, like Hopper
    rc, out, _err = smi.run(["mig", "-lgip"], path)
    assert rc == 0
    for name in ("1g.24gb+gfx", "1g.24gb+me.all", "1g.24gb-me", "2g.48gb+me.all", "4g.96gb+gfx"):
        assert f"MIG {name}" in out
    rc, out, _err = smi.run(["mig", "-lgipp"], path)
    assert "GPU  0 Profile ID 65 Placements: {0,1,2,3}:1" in out


def test_rtx_pro_6000_me_all_only_with_me_less_instances(make_host):
    path = make_host([("RTX-PRO-6000", 1)])
    smi.run(["-mig", "1"], path)
    assert smi.run(["mig", "-cgi", "65,67,67,67"], path)[0] == 0
    assert _profiles(path) == ["1g.24gb+me.all", "1g.24gb-me", "1g.24gb-me", "1g.24gb-me"]
    smi.run(["mig", "-dgi"], path)
    rc, out, _err = smi.run(["mig", "-cgi", "65,14"], path)
    assert rc == 255
    assert "using profile 14: Insufficient Resources" in out
    assert _profiles(path) == ["1g.24gb+me.all"]


def test_a30_holds_one_media_extension_instance(make_host):
    """S1: the A30 has one JPEG and one OFA, and each +me profile takes them."""
    path = make_host([("A30", 1)])
    smi.run(["-mig", "1"], path)
    rc, out, _err = smi.run(["mig", "-cgi", "6,21"], path)
    assert rc == 255
    assert "using profile 21: Insufficient Resources" in out
    assert _profiles(path) == ["2g.12gb+me"]
    assert smi.run(["mig", "-cgi", "14,14"], path)[0] == 0


def test_default_config_map_knows_the_rtx_pro_6000():
    configs = default_mig_parted_config()["mig-configs"]
    balanced = [item for item in configs["all-balanced"] if "0x2BB510DE" in item["device-filter"]]
    assert [item["mig-devices"] for item in balanced] == [{"1g.24gb": 2, "2g.48gb": 1}]
    assert configs["all-1g.24gb.gfx"][0]["mig-devices"] == {"1g.24gb+gfx": 4}
    assert configs["all-1g.24gb.me.all"][0]["mig-devices"] == {"1g.24gb+me.all": 1}
    assert configs["all-1g.24gb-me"][0]["mig-devices"] == {"1g.24gb-me": 4}


@pytest.mark.parametrize("name, expected", [
    ("all-balanced", ["1g.24gb", "1g.24gb", "2g.48gb"]),
    ("all-1g.24gb.me.all", ["1g.24gb+me.all"]),
    ("all-2g.48gb-me", ["2g.48gb-me", "2g.48gb-me"]),
    ("all-4g.96gb.gfx", ["4g.96gb+gfx"]),
])
def test_collection_default_configs_apply_on_the_rtx_pro_6000(make_host, tmp_path, name, expected):
    """The configs the collection renders for the catalog (mig_config, mig_operator_config) are accepted
    by the lab's nvidia-mig-parted on the Blackwell part and give the planned instances."""
    path = make_host([("RTX-PRO-6000", 1)])
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(MIG_PARTED.merged_configs(), sort_keys=False))
    assert migparted.run(["apply", "-f", str(config), "-c", name], path, env={}) == (
        0, "MIG configuration applied successfully\n", "")
    assert _profiles(path) == sorted(expected)
    assert migparted.run(["assert", "-f", str(config), "-c", name], path, env={})[0] == 0
