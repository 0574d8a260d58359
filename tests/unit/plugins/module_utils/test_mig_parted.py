"""Unit tests for the mig-parted v1 config logic (parse, validate, select, compare, render, defaults)."""

from __future__ import annotations

import pytest
import yaml

from ansible_collections.gpufleet.sharing.plugins.module_utils.mig import _mig_parted as mp
from ansible_collections.gpufleet.sharing.plugins.module_utils.gpu._mig_catalog import MODELS, MODELS_BY_KEY
from ansible_collections.gpufleet.sharing.plugins.module_utils.mig._mig_planner import plan_layout


def gpu(index=0, pci="0x20B010DE", capable=True, current=False, pending=None, instances=(), processes=(), name="NVIDIA A100-SXM4-40GB"):
    return {
        "index": index,
        "name": name,
        "uuid": "GPU-%04d" % index,
        "pci_device_id": pci,
        "mig": {
            "capable": capable,
            "current": current,
            "pending": current if pending is None else pending,
            "instances": [
                {"profile": p, "gi_id": i + 1, "placement": {"start": 0, "size": 1},
                 "compute_instances": [{"profile": p, "ci_id": 0}]}
                for i, p in enumerate(instances)
            ],
        },
        "processes": list(processes),
    }


def doc(configs):
    return {"version": "v1", "mig-configs": configs}


# ------------------------------------------------------------------ parsing


def test_parse_valid_config_with_all_field_forms():
    config = mp.parse_config(doc({
        "a": [{"device-filter": "0x20B010DE", "devices": "all", "mig-enabled": True, "mig-devices": {"1g.5gb": 7}}],
        "b": [
            {"device-filter": ["0x233010DE", "0x20B210de:0x147E10DE"], "devices": [0, 1], "mig-enabled": True, "mig-devices": {}},
            {"devices": [2], "mig-enabled": False},
        ],
    }))
    assert config.names == ["a", "b"]
    first = config.items("a")[0]
    assert first.devices == "all" and first.mig_enabled and first.layout() == {"1g.5gb": 7}
    assert str(first.device_filters[0]) == "0x20B010DE"
    second = config.items("b")
    assert second[0].devices == (0, 1)
    assert second[0].device_filters[1].subsystem_device_id == 0x147E
    assert second[1].mig_enabled is False and second[1].layout() == {}


@pytest.mark.parametrize("data, message", [
    ({"mig-configs": {"a": [{"devices": "all", "mig-enabled": False}]}}, "missing required field: version"),
    (doc({"a": [{"devices": "all", "mig-enabled": False}]}) | {"version": "v2"}, "unknown version: v2"),
    ({"version": "v1"}, "missing required field: mig-configs"),
    (doc({}), "at least one config"),
    (doc({"a": []}), "at least one item"),
    (doc({"a": {"devices": "all"}}), "expected a list of items"),
    (doc({"a": ["x"]}), "expected a mapping"),
    (doc({"a": [{"devices": "all", "mig-enabled": False, "extra": 1}]}), "unexpected field: extra"),
    (doc({"a": [{"mig-enabled": False}]}), "missing required field: devices"),
    (doc({"a": [{"devices": "all"}]}), "missing required field: mig-enabled"),
    (doc({"a": [{"devices": "all", "mig-enabled": True}]}), "missing required field 'mig-devices' when 'mig-enabled' is true"),
    (doc({"a": [{"devices": "all", "mig-enabled": False, "mig-devices": {"1g.5gb": 1}}]}), "MIG devices included when 'mig-enabled' is false"),
    (doc({"a": [{"devices": "some", "mig-enabled": False}]}), "devices must be \"all\""),
    (doc({"a": [{"devices": [], "mig-enabled": False}]}), "devices must be \"all\""),
    (doc({"a": [{"devices": [-1], "mig-enabled": False}]}), "devices must be \"all\""),
    (doc({"a": [{"devices": "all", "mig-enabled": "yes"}]}), "mig-enabled must be true or false"),
    (doc({"a": [{"devices": "all", "mig-enabled": True, "mig-devices": {"big": 1}}]}), "invalid MIG profile 'big'"),
    (doc({"a": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.5gb": -1}}]}), "non-negative integer"),
    (doc({"a": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.5gb": True}}]}), "non-negative integer"),
    (doc({"a": [{"devices": "all", "mig-enabled": True, "mig-devices": ["1g.5gb"]}]}), "mig-devices must be a mapping"),
    (doc({"a": [{"device-filter": "0x20B0", "devices": "all", "mig-enabled": False}]}), "invalid device-filter '0x20B0'"),
    (doc({"a": [{"device-filter": 0x20B010DE, "devices": "all", "mig-enabled": False}]}), "device-filter entries must be strings"),
    (doc({"a": [{"device-filter": "0x20B010DE:0x1:0x2", "devices": "all", "mig-enabled": False}]}), "invalid device-filter"),
    ([1, 2], "expected a mapping with 'version'"),
    ({"version": "v1", "mig-configs": ["a"]}, "mig-configs must be a mapping"),
    ({"version": "v1", "mig-configs": {"a": [{"devices": "all", "mig-enabled": False}]}, "hooks": {}}, "unexpected field: hooks"),
])
def test_parse_rejects_with_mig_parted_messages(data, message):
    with pytest.raises(mp.MigPartedError) as err:
        mp.parse_config(data, "cfg.yaml")
    assert message in str(err.value)
    assert str(err.value).startswith("cfg.yaml")


def test_parse_reports_every_problem_with_its_location():
    with pytest.raises(mp.MigPartedError) as err:
        mp.parse_config(doc({
            "a": [{"devices": "all"}, {"mig-enabled": True, "mig-devices": {}}],
            "b": [{"devices": "all", "mig-enabled": False, "x": 1}],
        }))
    problems = err.value.problems
    assert "config: mig-configs.a[0]: missing required field: mig-enabled" in problems
    assert "config: mig-configs.a[1]: missing required field: devices" in problems
    assert "config: mig-configs.b[0]: unexpected field: x" in problems


def test_parse_named_configs_wraps_role_variable_form():
    config = mp.parse_named_configs({"mine": [{"devices": "all", "mig-enabled": False}]})
    assert config.names == ["mine"]
    with pytest.raises(mp.MigPartedError, match="mig_configs: mig-configs.mine"):
        mp.parse_named_configs({"mine": [{"devices": "all"}]})


def test_mig_enabled_false_accepts_empty_mig_devices():
    config = mp.parse_config(doc({"a": [{"devices": "all", "mig-enabled": False, "mig-devices": {}}]}))
    assert config.items("a")[0].layout() == {}


@pytest.mark.parametrize("profile, parsed", [
    ("1g.5gb", (None, 1, 5, "")),
    ("1g.10gb+me", (None, 1, 10, "+me")),
    ("1g.24gb+me.all", (None, 1, 24, "+me.all")),
    ("1g.24gb-me", (None, 1, 24, "-me")),
    ("1c.3g.40gb", (1, 3, 40, "")),
    ("3g", None),
    ("MIG 3g.40gb", None),
])
def test_parse_profile(profile, parsed):
    assert mp.parse_profile(profile) == parsed


# ------------------------------------------------------------------ device filters


def test_device_filter_matching_is_case_insensitive_and_checks_subsystem():
    flt = mp.DeviceFilter.parse("0x20b010de")
    assert flt.matches("0x20B010DE")
    assert not flt.matches("0x20B110DE")
    assert not flt.matches(None)
    assert not flt.matches("garbage")
    sub = mp.DeviceFilter.parse("0x20B010DE:0x147E10DE")
    assert sub.matches("0x20B010DE", "0x147E10DE")
    assert not sub.matches("0x20B010DE", "0x147F10DE")
    assert not sub.matches("0x20B010DE")
    assert str(sub) == "0x20B010DE:0x147E10DE"


# ------------------------------------------------------------------ selection


def test_select_config_by_name_single_default_and_unknown():
    config = mp.parse_config(doc({"only": [{"devices": "all", "mig-enabled": False}]}))
    assert mp.select_config(config, None)[0] == "only"
    two = mp.parse_config(doc({"a": [{"devices": "all", "mig-enabled": False}], "b": [{"devices": "all", "mig-enabled": False}]}))
    assert mp.select_config(two, "b")[0] == "b"
    with pytest.raises(mp.MigPartedError, match="select one of: a, b"):
        mp.select_config(two, None)
    with pytest.raises(mp.MigPartedError, match=r"selected mig-config not present: c \(available: a, b\)"):
        mp.select_config(two, "c")


def test_desired_state_walks_filters_and_devices():
    items = mp.parse_config(doc({"x": [
        {"device-filter": "0x233010DE", "devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 7}},
        {"device-filter": "0x20B010DE", "devices": [1], "mig-enabled": True, "mig-devices": {"3g.20gb": 2}},
    ]})).items("x")
    gpus = [gpu(0, "0x20B010DE"), gpu(1, "0x20B010DE"), gpu(2, "0x233010DE")]
    desired = mp.desired_state(items, gpus, "x")
    assert sorted(desired) == [1, 2]
    assert desired[1].mig_devices == {"3g.20gb": 2} and desired[1].item_positions == (1,)
    assert desired[2].mig_devices == {"1g.10gb": 7}


def test_desired_state_drops_zero_counts_and_accepts_identical_duplicates():
    items = mp.parse_config(doc({"x": [
        {"devices": "all", "mig-enabled": True, "mig-devices": {"1g.5gb": 2, "2g.10gb": 0}},
        {"devices": [0], "mig-enabled": True, "mig-devices": {"1g.5gb": 2}},
    ]})).items("x")
    desired = mp.desired_state(items, [gpu(0)])
    assert desired[0].mig_devices == {"1g.5gb": 2}
    assert desired[0].item_positions == (0, 1)


def test_desired_state_conflicting_items_are_an_error():
    items = mp.parse_config(doc({"x": [
        {"devices": "all", "mig-enabled": True, "mig-devices": {"1g.5gb": 2}},
        {"devices": [0], "mig-enabled": False},
    ]})).items("x")
    with pytest.raises(mp.MigPartedError, match="GPU 0 is matched by items 0 and 1"):
        mp.desired_state(items, [gpu(0)], "x")


def test_non_mig_capable_gpu_is_skipped_unless_explicitly_targeted():
    not_capable = gpu(0, "0x223610DE", capable=False, name="NVIDIA A10")
    enable_all = mp.parse_config(doc({"x": [{"devices": "all", "mig-enabled": True, "mig-devices": {}}]})).items("x")
    assert mp.desired_state(enable_all, [not_capable]) == {}
    disable_0 = mp.parse_config(doc({"x": [{"devices": [0], "mig-enabled": False}]})).items("x")
    assert mp.desired_state(disable_0, [not_capable]) == {}
    enable_0 = mp.parse_config(doc({"x": [{"devices": [0], "mig-enabled": True, "mig-devices": {}}]})).items("x")
    with pytest.raises(mp.MigPartedError, match=r"GPU 0 \(NVIDIA A10\): cannot set MIG mode on non MIG-capable GPU"):
        mp.desired_state(enable_0, [not_capable], "x")


def test_missing_device_index_is_ignored_like_mig_parted():
    items = mp.parse_config(doc({"x": [{"devices": [0, 5], "mig-enabled": False}]})).items("x")
    assert sorted(mp.desired_state(items, [gpu(0)])) == [0]


# ------------------------------------------------------------------ comparison


def test_current_layout_counts_profiles_and_ci_profiles():
    facts = gpu(0, current=True, instances=["1g.5gb", "1g.5gb", "3g.20gb"])
    facts["mig"]["instances"].append({"profile": "3g.20gb", "compute_instances": [{"profile": "1c.3g.20gb"}]})
    layout = mp.current_layout(facts)
    assert layout["mig_devices"] == {"1c.3g.20gb": 1, "1g.5gb": 2, "3g.20gb": 1}
    assert layout["mig_enabled"] and layout["mig_pending"] and layout["mig_capable"]


def test_desired_layout_after_state():
    current = mp.current_layout(gpu(0, current=True, instances=["7g.40gb"]))
    assert mp.desired_layout(current, None) == current
    after = mp.desired_layout(current, mp.DesiredGpu(0, True, {"2g.10gb": 3}))
    assert after["mig_devices"] == {"2g.10gb": 3} and after["uuid"] == "GPU-0000"
    off = mp.desired_layout(current, mp.DesiredGpu(0, False, {}))
    assert off["mig_enabled"] is False and off["mig_devices"] == {}


# ------------------------------------------------------------------ defaults and rendering


def test_default_configs_cover_mig_parted_names():
    defaults = mp.default_configs()
    for name in ("all-disabled", "all-enabled", "all-balanced", "all-1g.5gb", "all-1g.5gb.me", "all-1g.10gb",
                 "all-1g.10gb.me", "all-1g.20gb", "all-2g.20gb", "all-3g.40gb", "all-4g.40gb", "all-7g.80gb",
                 "all-1g.6gb", "all-2g.12gb", "all-2g.12gb.me", "all-4g.24gb", "all-1g.18gb", "all-1g.35gb",
                 "all-3g.71gb", "all-7g.141gb", "all-3g.47gb", "all-7g.94gb", "all-7g.180gb"):
        assert name in defaults, name
    assert defaults["all-disabled"] == [{"devices": "all", "mig-enabled": False}]
    assert defaults["all-enabled"] == [{"devices": "all", "mig-enabled": True, "mig-devices": {}}]


def test_all_1g_10gb_differs_between_40gb_and_80gb_models():
    items = mp.parse_named_configs(mp.default_configs()).items("all-1g.10gb")
    a100_40 = gpu(0, "0x20B010DE")
    h100 = gpu(1, "0x233010DE")
    h200 = gpu(2, "0x233510DE")
    desired = mp.desired_state(items, [a100_40, h100, h200])
    assert desired[0].mig_devices == {"1g.10gb": 4}
    assert desired[1].mig_devices == {"1g.10gb": 7}
    assert 2 not in desired  # no 1g.10gb profile on H200


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.key)
def test_every_default_layout_is_valid_for_every_model_it_matches(model):
    parsed = mp.parse_named_configs(mp.default_configs())
    facts = gpu(0, model.pci_device_ids[0])
    for name in parsed.names:
        desired = mp.desired_state(parsed.items(name), [facts], name)
        if name.startswith("all-") and name not in ("all-disabled", "all-enabled"):
            profile_names = set(model.profile_names())
            if name == "all-balanced" or name[4:].replace(".me", "+me") in profile_names:
                assert 0 in desired, (name, model.key)
        if 0 in desired and desired[0].mig_enabled:
            plan_layout(model, desired[0].mig_devices)  # raises when the catalog disagrees


def test_balanced_matches_spec_for_a100_40gb_and_h200():
    parsed = mp.parse_named_configs(mp.default_configs())
    items = parsed.items("all-balanced")
    desired = mp.desired_state(items, [gpu(0, "0x20B010DE"), gpu(1, "0x233510DE"), gpu(2, "0x20B710DE")])
    assert desired[0].mig_devices == {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}
    assert desired[1].mig_devices == {"1g.18gb": 2, "2g.35gb": 1, "3g.71gb": 1}
    assert desired[2].mig_devices == {"1g.6gb": 2, "2g.12gb": 1}


def test_default_configs_for_a_subset_of_models():
    defaults = mp.default_configs([MODELS_BY_KEY["H200"]])
    assert "all-1g.18gb" in defaults and "all-1g.10gb" not in defaults
    assert defaults["all-1g.18gb"][0]["device-filter"] == ["0x233510DE", "0x233B10DE"]


def test_merged_configs_extra_names_override_defaults():
    merged = mp.merged_configs({"custom": [{"devices": [0], "mig-enabled": False}],
                                "all-balanced": [{"devices": "all", "mig-enabled": False}]})
    assert merged["version"] == "v1"
    assert merged["mig-configs"]["custom"] == [{"devices": [0], "mig-enabled": False}]
    assert merged["mig-configs"]["all-balanced"] == [{"devices": "all", "mig-enabled": False}]


def test_render_yaml_round_trips_through_a_yaml_parser():
    document = mp.merged_configs({"on": [{"device-filter": ["0x20B010DE"], "devices": [0, 1], "mig-enabled": True,
                                          "mig-devices": {"1g.5gb+me": 1, "3g.20gb": 1}}],
                                  "yes": [{"devices": "all", "mig-enabled": False}],
                                  "1234": [{"devices": "all", "mig-enabled": False}]})
    text = mp.render_yaml(document)
    assert yaml.safe_load(text) == document
    assert mp.render_yaml(document) == text  # deterministic
    reparsed = mp.parse_config(yaml.safe_load(text))
    assert reparsed.as_dict() == mp.parse_config(document).as_dict()


def test_as_dict_renders_single_filter_as_string_and_omits_devices_when_disabled():
    config = mp.parse_config(doc({"x": [
        {"device-filter": ["0x20B010DE"], "devices": "all", "mig-enabled": True, "mig-devices": {"1g.5gb": 1}},
        {"devices": [3], "mig-enabled": False, "mig-devices": {}},
    ]}))
    assert config.as_dict()["mig-configs"]["x"] == [
        {"device-filter": "0x20B010DE", "devices": "all", "mig-enabled": True, "mig-devices": {"1g.5gb": 1}},
        {"devices": [3], "mig-enabled": False},
    ]


def test_an_item_naming_no_gpu_of_the_host_is_refused():
    items = mp.parse_config(doc({"x": [{"devices": [5], "mig-enabled": False}]})).items("x")
    with pytest.raises(mp.MigPartedError, match="devices lists GPU 5, but this host has GPU 0"):
        mp.desired_state(items, [gpu(0)], "x")


@pytest.mark.parametrize("name", ["a\nExecStartPre=/bin/sh", "a/b", "..", "a b", 'a"b', "$(id)", "gp\u00fc", "a" * 64, "-a", "a\n"])
def test_config_names_must_be_label_values(name):
    with pytest.raises(mp.MigPartedError, match="config name"):
        mp.parse_config(doc({name: [{"devices": "all", "mig-enabled": False}]}))


def test_catalog_refuses_a_profile_the_filtered_model_lacks():
    config = mp.parse_config(doc({"x": [{"device-filter": "0x20B010DE", "devices": "all", "mig-enabled": True,
                                         "mig-devices": {"3g.40gb": 1}}]}))
    assert any("3g.40gb" in p for p in mp.catalog_problems(config, ["x"]))
    unknown = mp.parse_config(doc({"y": [{"devices": "all", "mig-enabled": True, "mig-devices": {"9g.99gb": 1}}]}))
    assert mp.catalog_problems(unknown, ["y"])
    fine = mp.parse_config(doc({"z": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 1}}]}))
    assert mp.catalog_problems(fine, ["z"]) == []


@pytest.mark.parametrize("extra", [
    None, {},
    {"mine": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.5gb": 7}}]},
    {"all-balanced": [{"devices": [0], "mig-enabled": False}], "zzz": [{"devices": "all", "mig-enabled": False}]},
])
def test_parse_with_defaults_is_parsing_the_merged_document(extra):
    assert mp.parse_with_defaults(extra, "host mig_configs") == mp.parse_config(mp.merged_configs(extra), "host mig_configs")


@pytest.mark.parametrize("extra", [
    {"bad name!": [{"devices": "all", "mig-enabled": False}]},
    {"x": [{"devices": "all", "mig-enabled": "yes"}], "y": "not a list"},
])
def test_parse_with_defaults_reports_the_same_problems(extra):
    with pytest.raises(mp.MigPartedError) as merged:
        mp.parse_config(mp.merged_configs(extra), "host mig_configs")
    with pytest.raises(mp.MigPartedError) as cached:
        mp.parse_with_defaults(extra, "host mig_configs")
    assert cached.value.problems == merged.value.problems


def test_parse_with_defaults_refuses_a_non_mapping():
    with pytest.raises(mp.MigPartedError, match="host mig_configs: must be a mapping of config name"):
        mp.parse_with_defaults(["all-disabled"], "host mig_configs")


@pytest.mark.parametrize("content, include_defaults, name", [
    (None, True, "all-balanced"),
    ({"version": "v1", "mig-configs": {}}, True, "all-1g.10gb"),
    ({"version": "v1", "mig-configs": {"mine": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.5gb": 7}}]}}, True, "mine"),
    ({"version": "v1", "mig-configs": {"all-balanced": [{"devices": [0], "mig-enabled": False}]}}, True, "all-balanced"),
    ({"version": "v2", "extra": 1, "mig-configs": {"x": "not a list"}}, True, "x"),
    ({"version": "v1", "extra": 1, "mig-configs": {}}, True, "all-balanced"),
    ({"version": "v1", "mig-configs": "nope"}, True, "x"),
    ({"version": "v1", "mig-configs": {"x": [{"devices": "all", "mig-enabled": False}]}}, False, "x"),
    ({"version": "v1", "mig-configs": {}}, True, "missing"),
])
def test_plan_named_config_is_planning_the_merged_document(content, include_defaults, name):
    """The defaults are parsed once, but the answer is the one of parsing config_with_defaults(...)."""
    requested = MODELS_BY_KEY["A100-40GB"]
    try:
        merged = mp.parse_config(mp.config_with_defaults(content, include_defaults), source="config")
        expected = mp.select_config(merged, name)
    except (mp.DocumentError, mp.MigPartedError) as error:
        expected = error
    planned = mp.plan_named_config(content, include_defaults, name, requested)
    if isinstance(expected, mp.DocumentError):
        assert planned.message == str(expected)
    elif isinstance(expected, mp.MigPartedError):
        assert planned.problems == tuple(expected.problems)
    else:
        plans, problems = mp.plan_items(expected[0], expected[1], requested)
        assert (planned.name, list(planned.plans), list(planned.problems)) == (expected[0], plans, problems)


def test_items_selecting_one_gpu_with_different_layouts_are_refused_without_a_host():
    """Issue 21 (11): mig_plan and preflight plan per model; two items that select the same devices of a
    model with different layouts are refused (mig-parted would apply both in turn), the same layout twice is not."""
    config = mp.parse_named_configs({
        "clash": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.5gb": 7}},
                  {"devices": [1], "mig-enabled": True, "mig-devices": {"3g.20gb": 2}}],
        "apart": [{"devices": [0], "mig-enabled": True, "mig-devices": {"1g.5gb": 7}},
                  {"devices": [1], "mig-enabled": True, "mig-devices": {"3g.20gb": 2}}],
        "same": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.5gb": 7}},
                 {"devices": [1], "mig-enabled": True, "mig-devices": {"1g.5gb": 7}}]})
    model = MODELS_BY_KEY["A100-40GB"]
    problems = mp.plan_items("clash", config.items("clash"), model)[1]
    assert problems == ["mig-configs.clash: items 0 and 1 both select GPU(s) 1 of A100-40GB with different layouts "
                        "(nvidia-mig-parted would apply both in turn)"]
    assert mp.plan_items("apart", config.items("apart"), model)[1] == []
    assert mp.plan_items("same", config.items("same"), model)[1] == []
