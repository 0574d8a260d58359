"""The release records decoded in pure code say what the real helm 4 says (issue 26): after an
install, an upgrade and a refused upgrade, `helm list --deployed --failed --pending` and `helm get
values` against the lab's API server equal _helm_release's reading of the release's Secrets."""

from __future__ import annotations

import json

from ansible_collections.gpufleet.sharing.plugins.module_utils.operator._helm_release import release_from_records

from test_kubectl_helm import CHART, helm, lab  # noqa: F401  pylint: disable=unused-import,import-error

NS = "gpu-operator"


def _helm_view(helm, name):  # noqa: F811
    listed = json.loads(helm("list", "-n", NS, "--deployed", "--failed", "--pending", "--filter", "^%s$" % name,
                             "-o", "json").stdout)
    if not listed:  # `helm get values` of an uninstalled release fails: "release: not found"
        return None, {}
    return listed[0], json.loads(helm("get", "values", name, "-n", NS, "-o", "json").stdout) or {}


def _records_view(lab, name):  # noqa: F811
    entry, values = release_from_records(lab.store.items("v1/secrets", NS), name, NS)
    if entry is not None:
        entry.pop("updated")  # helm prints the time in its own format; the module does not read it
    return entry, values


def test_records_say_what_helm_says(helm, lab, tmp_path):  # noqa: F811
    chart = tmp_path / "recop"
    for name, text in CHART.items():
        (chart / name).parent.mkdir(parents=True, exist_ok=True)
        (chart / name).write_text(text)
    helm("install", "rec", str(chart), "-n", NS, "--create-namespace", "--set", "strategy=mixed")
    helm("upgrade", "rec", str(chart), "-n", NS, "--set", "strategy=single", "--set", "extraKey=false")
    for step in range(2):
        listed, values = _helm_view(helm, "rec")
        listed.pop("updated")
        assert _records_view(lab, "rec") == (listed, values), step
        assert listed["revision"] == str(2 + step)
        lab.store.patch("nvidia.com/v1/clusterpolicies", None, "rec-policy", {"spec": {"mig": {"strategy": "none"}}},
                        "merge", field_manager="gpufleet.sharing")
        helm("upgrade", "rec", str(chart), "-n", NS, "--set", "strategy=mixed", check=False)  # refused: failed
    assert _records_view(lab, "rec")[0]["status"] == "failed"
    helm("uninstall", "rec", "-n", NS)
    assert _records_view(lab, "rec") == (None, {}) and _helm_view(helm, "rec") == (None, {})
