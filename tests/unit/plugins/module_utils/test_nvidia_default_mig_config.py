# -*- coding: utf-8 -*-
"""NVIDIA's own default MIG config must be accepted by mig_config and mig_operator_config (issue 25 §3).

NVIDIA_DEFAULT below is a rendition, written for this test, of the content of NVIDIA's default
mig-parted config: NVIDIA/mig-parted v0.15.0 ``deployments/systemd/config-default.yaml``, which the GPU
Operator v26.7.0 ships as the MIG manager's ConfigMap ``default-mig-parted-config``
(NVIDIA/gpu-operator v26.7.0 ``assets/state-mig-manager/0400_configmap.yaml``: the same configs, the
``all-balanced`` items in another order). It has every config name, every device-filter (as the file
spells it: a list, or a bare string for the A30) and every layout of that file; not its comments,
order or formatting. docs/reference/specs.md §6.5 describes the file.
"""

from __future__ import annotations

import pytest

from ansible_collections.gpufleet.sharing.plugins.module_utils.mig import _mig_apply as ma
from ansible_collections.gpufleet.sharing.plugins.module_utils.mig import _mig_operator as mop
from ansible_collections.gpufleet.sharing.plugins.module_utils.mig import _mig_parted as mp
from ansible_collections.gpufleet.sharing.plugins.module_utils.gpu._mig_catalog import MODELS, find_model, resolve_model

from test_mig_parted import gpu

# Configs of one item without a device-filter that ask every GPU for one profile: profile -> count.
# The config is called all-<profile>, '+' written '.' ('1g.24gb+me.all' -> all-1g.24gb.me.all).
_ONE_PROFILE = {
    # A100 40GB
    "1g.5gb": 7, "1g.5gb+me": 1, "2g.10gb": 3, "3g.20gb": 2, "4g.20gb": 1, "7g.40gb": 1,
    # RTX PRO 6000 Blackwell
    "1g.24gb+gfx": 4, "1g.24gb+me.all": 1, "1g.24gb-me": 4, "2g.48gb": 2, "2g.48gb+gfx": 2,
    "2g.48gb+me.all": 1, "2g.48gb-me": 2, "4g.96gb": 1, "4g.96gb+gfx": 1,
    # 80GB parts (A100, H100)
    "1g.10gb+me": 1, "1g.20gb": 4, "2g.20gb": 3, "3g.40gb": 2, "4g.40gb": 1, "7g.80gb": 1,
    # A30
    "1g.6gb": 4, "1g.6gb+me": 1, "2g.12gb": 2, "2g.12gb+me": 1, "4g.24gb": 1,
    # H100 NVL, H100 96GB, GH200
    "1g.12gb": 7, "1g.12gb+me": 1, "1g.24gb": 4, "2g.24gb": 3, "1g.24gb+me": 1,
    "3g.47gb": 2, "4g.47gb": 1, "7g.94gb": 1, "3g.48gb": 2, "4g.48gb": 1, "7g.96gb": 1,
    # GB200
    "1g.47gb": 4, "2g.47gb": 3, "3g.93gb": 2, "4g.93gb": 1, "7g.186gb": 1,
    "3g.95gb": 2, "4g.95gb": 1, "7g.189gb": 1,
    # H200, GH200 144G, B200, B300, GB300
    "1g.18gb": 7, "1g.18gb+me": 1, "1g.23gb": 7, "1g.23gb+me": 1,
    "2g.35gb": 3, "3g.71gb": 2, "4g.71gb": 1, "7g.141gb": 1,
    "1g.34gb": 7, "1g.34gb+me": 1, "1g.35gb+me": 1,
    "1g.36gb": 4, "1g.45gb": 4, "1g.67gb": 4, "1g.70gb": 4,
    "2g.36gb": 3, "2g.45gb": 3, "2g.67gb": 3, "2g.70gb": 3,
    "3g.72gb": 2, "3g.90gb": 2, "3g.135gb": 2, "3g.139gb": 2,
    "4g.72gb": 1, "4g.90gb": 1, "4g.135gb": 1, "4g.139gb": 1,
    "7g.144gb": 1, "7g.180gb": 1, "7g.269gb": 1, "7g.278gb": 1,
}


def _ids(*short):
    return ["0x%s10DE" % s for s in short]


_80GB = _ids("2330", "2331", "2322", "20B2", "20B5", "20F3", "20F5", "2324")
_40GB = _ids("20B0", "20B1", "20F1", "20F6")

# Configs whose items carry device-filters: (device-filter, layout) per item.
_FILTERED = {
    "all-1g.10gb": [(_80GB, {"1g.10gb": 7}), (_40GB, {"1g.10gb": 4})],
    "all-1g.35gb": [(_ids("2335"), {"1g.35gb": 4}), (_ids("31C2"), {"1g.35gb": 7})],
    "all-balanced": [
        (_ids("2941"), {"1g.23gb": 2, "2g.47gb": 1, "3g.93gb": 1}),
        (_ids("31C2"), {"1g.35gb": 2, "2g.70gb": 1, "3g.139gb": 1}),
        (_ids("2BB5"), {"1g.24gb": 2, "2g.48gb": 1}),
        (_ids("2901"), {"1g.23gb": 2, "2g.45gb": 1, "3g.90gb": 1}),
        (_ids("3182"), {"1g.34gb": 2, "2g.67gb": 1, "3g.135gb": 1}),
        (_ids("2348"), {"1g.18gb": 2, "2g.36gb": 1, "3g.72gb": 1}),
        (_ids("2335", "233B"), {"1g.18gb": 2, "2g.35gb": 1, "3g.71gb": 1}),
        (_ids("2321", "233A"), {"1g.12gb": 2, "2g.24gb": 1, "3g.47gb": 1}),
        (_80GB, {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}),
        (_40GB, {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}),
        ("0x20B710DE", {"1g.6gb": 2, "2g.12gb": 1}),
        (_ids("2342", "233D", "20B6", "2329"), {"1g.12gb": 2, "2g.24gb": 1, "3g.48gb": 1}),
    ],
}


def nvidia_default():
    configs = {
        "all-disabled": [{"devices": "all", "mig-enabled": False}],
        "all-enabled": [{"devices": "all", "mig-enabled": True, "mig-devices": {}}],
    }
    for profile, count in _ONE_PROFILE.items():
        configs["all-" + profile.replace("+", ".")] = [{"devices": "all", "mig-enabled": True, "mig-devices": {profile: count}}]
    for name, items in _FILTERED.items():
        configs[name] = [{"device-filter": flt, "devices": "all", "mig-enabled": True, "mig-devices": dict(layout)}
                         for flt, layout in items]
    return {"version": "v1", "mig-configs": configs}


def _gpu_of(pci):
    model = find_model("", pci)
    return gpu(0, pci, name=model.product_names[0])


def _plans(config, name, pci):
    """None when mig_config plans ``name`` for a GPU with this PCI id, else its problems."""
    try:
        plan = ma.plan_host(config, name, [_gpu_of(pci)])
    except mp.MigPartedError as exc:
        return exc.problems
    return None if plan.after[0] != plan.before[0] or name == "all-disabled" else ["left untouched"]


def test_the_rendition_has_every_config_of_the_file():
    assert len(nvidia_default()["mig-configs"]) == 81  # names in mig-parted v0.15.0 config-default.yaml


def test_mig_operator_config_accepts_nvidia_default_file():
    """mig_operator_config's validation: every config of the file (as the user's own configs, and
    merged over the collection's defaults)."""
    configs = nvidia_default()["mig-configs"]
    for include_defaults in (False, True):
        document = mop.operator_config_document(configs, None, include_defaults)
        assert set(configs) <= set(document["mig-configs"])
    assert mp.catalog_problems(mp.parse_config(nvidia_default()), sorted(configs)) == []


def test_mig_config_plans_every_config_of_nvidia_default_file():
    """mig_config's validation (plan_host) on one GPU of each catalog model: every item with a
    device-filter plans on every GPU it names; every config plans on at least one GPU it touches."""
    config = mp.parse_config(nvidia_default())
    problems = []
    for name in config.names:
        for position, item in enumerate(config.items(name)):
            for pci in (str(flt) for flt in item.device_filters):
                found = _plans(config, name, pci) if find_model("", pci) is not None else None
                if found:
                    problems.append("%s[%d] on %s: %s" % (name, position, pci, found))
        if not any(_plans(config, name, model.pci_device_ids[0]) is None for model in MODELS):
            problems.append("%s plans on no GPU model of the catalog" % name)
    assert problems == []


@pytest.mark.parametrize("name, pci", [
    ("all-1g.35gb.me", "0x31C210DE"),   # GB300, mig-parted 75449116 "add the mig profiles for GB300"
    ("all-3g.95gb", "0x294110DE"),      # GB200 boards of gpu-operator#1303 / mig-parted 89dd81a3
    ("all-4g.95gb", "0x294110DE"),
    ("all-7g.189gb", "0x294110DE"),
])
def test_the_four_configs_the_catalog_refused(name, pci):
    config = mp.parse_config(nvidia_default())
    assert _plans(config, name, pci) is None
    assert resolve_model(pci).key in ("GB200", "GB300")


# ---------------------------------------------------------------------------------------------
# Two derived defaults name devices NVIDIA's static file leaves out: H200 NVL (0x233B) in all-1g.35gb
# (the file filters that item to 0x2335 since mig-parted 75449116 added GB300's) and the RTX PRO 6000
# Blackwell Workstation Edition (0x2BB1) in all-balanced. Both are what NVIDIA's own generator makes on
# those GPUs: mig-parted v0.15.0 `nvidia-mig-parted generate-config`, which the MIG manager runs at start
# and prefers to the static file (pkg/mig/builder/builder.go: one all-<profile> item per profile at each
# device's maximum; pkg/mig/builder/balanced.go: 2 x 1g + 1 x 2g (+ 1 x 3g on 7-slice GPUs), taking the
# base profile with the largest maximum). That 0x233B has the H200 profiles is NVIDIA's all-balanced
# item for "H200 141GB, H200 NVL"; that 0x2BB1 has the RTX PRO 6000 ones, the MIG user guide's supported
# GPUs (docs/reference/specs.md §2.6, §2.15, S3).


def _generated_balanced(model):
    """balanced.go's rule, written here independently of the catalog's own balanced layouts."""
    other = set(name for names in model.namings[1:] for name in names)
    base = [p for p in model.profiles if "+" not in p.name and "-" not in p.name and p.name not in other]
    slots = max(p.compute_slices for p in base)
    formula = {7: {1: 2, 2: 1, 3: 1}, 4: {1: 2, 2: 1}}[slots]
    return dict((max((p for p in base if p.compute_slices == g), key=lambda p: p.max_instances).name, count)
                for g, count in formula.items())


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.key)
def test_balanced_is_what_generate_config_makes(model):
    assert model.balanced == _generated_balanced(model)


def test_the_two_devices_beyond_nvidia_file_are_the_generators():
    defaults = mp.parse_named_configs(mp.default_configs())
    h200_nvl = mp.desired_state(defaults.items("all-1g.35gb"), [_gpu_of("0x233B10DE")])
    assert h200_nvl[0].mig_devices == {"1g.35gb": resolve_model("0x233B10DE").profile("1g.35gb").max_instances} == {"1g.35gb": 4}
    workstation = mp.desired_state(defaults.items("all-balanced"), [_gpu_of("0x2BB110DE")])
    assert workstation[0].mig_devices == _generated_balanced(resolve_model("0x2BB110DE")) == {"1g.24gb": 2, "2g.48gb": 1}


def test_a_gb200_whose_instances_show_its_naming_is_held_to_it():
    """A GB200 with GPU instances already prints its naming (nvidia-smi mig -lgi shows the names the board
    has): the other naming's profiles do not exist on it, as nvidia-mig-parted would find when applying."""
    config = mp.parse_config(nvidia_default())
    board = gpu(0, "0x294110DE", name="NVIDIA GB200", current=True, instances=["3g.93gb", "3g.93gb"])
    with pytest.raises(mp.MigPartedError) as caught:
        ma.plan_host(config, "all-3g.95gb", [board])
    assert caught.value.problems == [
        "GPU 0 (NVIDIA GB200, model GB200), config all-3g.95gb: this board prints the GB200 profile names "
        "1g.23gb, 1g.23gb+me, 3g.93gb, 4g.93gb, 7g.186gb (its GPU instances are 3g.93gb), so 3g.95gb does not "
        "exist on it: use 3g.93gb"]
    assert ma.plan_host(config, "all-3g.93gb", [board]).changes == ()
    assert ma.plan_host(config, "all-1g.47gb", [board]).changes  # common to both namings
    fresh = gpu(0, "0x294110DE", name="NVIDIA GB200")  # no instances: its naming is not known here
    assert ma.plan_host(config, "all-3g.95gb", [fresh]).changes


def test_where_the_names_meet_the_collections_defaults_are_nvidias_layouts():
    """Issue 42 part 3: a config name of NVIDIA's file means the same layout in the collection's derived defaults,
    for every catalog model (each PCI id) that has the profile. NVIDIA's all-<profile> items without a device-filter
    ask a fixed count of every GPU (all-1g.24gb is 4 x 1g.24gb), not each model's maximum (GB200's is 7)."""
    ours, theirs = mp.parse_named_configs(mp.default_configs()), mp.parse_config(nvidia_default())
    problems = []
    for model in MODELS:
        for profile in model.profiles:
            name = "all-" + profile.name.replace("+", ".")
            if name not in theirs.names:
                continue
            for pci in model.pci_device_ids:
                got, want = (getattr(mp.desired_state(c.items(name), [_gpu_of(pci)]).get(0), "mig_devices", None)
                             for c in (ours, theirs))
                if want is not None and got != want:  # None: NVIDIA's file leaves that GPU alone (see above)
                    problems.append("%s on %s (%s): ours %s, NVIDIA's %s" % (name, model.key, pci, got, want))
    assert problems == []
