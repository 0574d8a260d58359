"""Every name and label the DRA objects carry follows Kubernetes' rules, for every product and MIG profile of the
catalog and every sharing strategy (issue 42): label values <= 63 characters (RFC 1123 label-value syntax), object
names DNS subdomains (<= 253, each part a DNS label), and the DeviceClass name <= 63 as Kueue's deviceClassNames
need. The RTX PRO 6000 Blackwell Workstation / Max-Q kinds with time-slicing were 66 to 72 characters."""

from __future__ import annotations

import re

import pytest

from ansible_collections.gpufleet.sharing.plugins.module_utils.gpu._mig_catalog import MODELS
from ansible_collections.gpufleet.sharing.plugins.module_utils.sharing._dra_claims import MAX_KIND, gpu_kind, mig_kind
from ansible_collections.gpufleet.sharing.plugins.module_utils.sharing._dra_objects import claim_template, device_class

LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def _kinds():
    found = {}
    for model in MODELS:
        for product in model.product_names:
            for sharing in (None, "time-slicing", "mps"):
                kind = gpu_kind(product, sharing)
                found[kind.name] = found.get(kind.name, set()) | {(product, sharing)}
        for profile in model.profiles:
            kind = mig_kind(profile.name)
            found[kind.name] = found.get(kind.name, set()) | {("mig", profile.name)}
    return found


def _dns_subdomain(name):
    return len(name) <= 253 and all(DNS_LABEL.match(part) and len(part) <= 63 for part in name.split("."))


@pytest.mark.parametrize("kind_name", sorted(_kinds()))
def test_every_name_and_label_of_a_kind_is_valid(kind_name):
    (one,) = [gpu_kind(p, s) if p != "mig" else mig_kind(s) for p, s in sorted(_kinds()[kind_name])][:1]
    objects = [device_class(one), claim_template(one, "team-a")]
    for obj in objects:
        meta = obj["metadata"]
        assert _dns_subdomain(meta["name"]), meta["name"]
        for key, value in meta["labels"].items():
            assert len(value) <= 63 and LABEL_VALUE.match(value), (key, value, len(value))
    assert len(one.device_class) <= 63 and len(one.name) <= MAX_KIND
    assert DNS_LABEL.match(one.name)


def test_distinct_products_and_profiles_keep_distinct_names():
    # MIG profiles that differ only by punctuation (1g.10gb+me vs 1g.10gb-me) would map to one kind by slug alone;
    # the catalog's products and profiles with different CEL selectors must not share a name
    for name, owners in _kinds().items():
        selectors = {(gpu_kind(p, s) if p != "mig" else mig_kind(s)).selector() for p, s in owners}
        assert len(selectors) == 1, (name, owners)


def test_long_kinds_are_shortened_stably():
    kind = gpu_kind("NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition", "time-slicing")
    assert kind.name == gpu_kind("NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition", "time-slicing").name
    assert len(kind.name) <= MAX_KIND and kind.name.startswith("gpu-nvidia-rtx-pro-6000-blackwell")
    assert gpu_kind("NVIDIA H100 80GB HBM3").name == "gpu-nvidia-h100-80gb-hbm3"  # short kinds are unchanged
