# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""MIG geometry per GPU model: the single source of truth for profiles and placements.

Pure data and lookups, no I/O. Facts come from NVIDIA's MIG user guide, nvidia-smi captures and
the mig-parted defaults (see the docs/reference/specs.md references in the comments).
Where the MIG user guide and a real capture disagree, the capture wins (e.g. H200 memory sizes).
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional, Tuple

from ansible_collections.gpufleet.sharing.plugins.module_utils.base._memo import Memo


# Media engines a GPU instance may own, in this order: video decoders, JPEG decoders, optical-flow
# accelerators (the "Hardware Units" column of NVIDIA's profile tables, docs/reference/specs.md §2.16).
ENGINE_NAMES = ('decoders', 'jpeg', 'ofa')
Engines = Tuple[int, int, int]


class CatalogError(ValueError):
    """An identifier does not name a GPU model (or a profile of one) that the catalog knows."""


class MigProfile:
    """One GPU-instance profile of one GPU model."""

    __slots__ = ('name', 'gi_profile_id', 'max_instances', 'memory_slices', 'compute_slices',
                 'starts', 'memory_gib', 'multiprocessors', 'engines', 'media_extensions')

    def __init__(self, name: str, gi_profile_id: int, max_instances: int, memory_slices: int,
                 compute_slices: int, starts: Tuple[int, ...], memory_gib: Optional[float] = None,
                 multiprocessors: Optional[int] = None, engines: Engines = (0, 0, 0)) -> None:
        self.name = name
        self.gi_profile_id = gi_profile_id
        self.max_instances = max_instances
        self.memory_slices = memory_slices
        self.compute_slices = compute_slices
        self.starts = tuple(starts)
        self.memory_gib = memory_gib
        self.multiprocessors = multiprocessors
        # (NVDEC, JPEG, OFA) this instance takes from the GPU (docs/reference/specs.md §2.16).
        self.engines = tuple(engines)
        # '+me' and '+me.all' take the GPU's optical-flow engine (docs/reference/specs.md §2.16).
        self.media_extensions = '+me' in name

    @property
    def resource_suffix(self) -> str:
        """Device-plugin resource name suffix: '+' becomes '.' (docs/reference/specs.md §9.1)."""
        return self.name.replace('+', '.')

    def placement_text(self) -> str:
        """Placements in nvidia-smi's `-lgipp` notation, e.g. '{0,2,4}:2'."""
        return '{%s}:%d' % (','.join(str(s) for s in self.starts), self.memory_slices)

    def as_dict(self) -> Dict[str, object]:
        return {
            'name': self.name,
            'gi_profile_id': self.gi_profile_id,
            'max_instances': self.max_instances,
            'memory_slices': self.memory_slices,
            'compute_slices': self.compute_slices,
            'placements': [{'start': s, 'size': self.memory_slices} for s in self.starts],
            'memory_gib': self.memory_gib,
            'multiprocessors': self.multiprocessors,
            'engines': dict(zip(ENGINE_NAMES, self.engines)),
        }

    def __repr__(self) -> str:
        return 'MigProfile(%s id=%d max=%d %s)' % (self.name, self.gi_profile_id, self.max_instances,
                                                   self.placement_text())


class GpuModel:
    """A MIG-capable GPU model: identity plus its profiles."""

    __slots__ = ('key', 'product_names', 'pci_device_ids', 'architecture', 'memory_slices',
                 'compute_slices', 'max_instances', 'profiles', 'balanced', 'verified_placements',
                 'namings', '_by_name')

    def __init__(self, key: str, product_names: Tuple[str, ...], pci_device_ids: Tuple[str, ...],
                 architecture: str, memory_slices: int, compute_slices: int, max_instances: int,
                 profiles: Tuple[MigProfile, ...], balanced: Dict[str, int], verified_placements: bool,
                 namings: Tuple[Tuple[str, ...], ...] = ()) -> None:
        self.key = key
        self.product_names = product_names
        self.pci_device_ids = pci_device_ids
        self.architecture = architecture
        self.memory_slices = memory_slices
        self.compute_slices = compute_slices
        self.max_instances = max_instances
        self.profiles = profiles
        self.balanced = balanced
        self.verified_placements = verified_placements
        # Sets of profile names of which a board prints only one (same geometry, other names): a
        # layout may use names of one set only (GB200, docs/reference/specs.md §2.13).
        self.namings = namings
        self._by_name = dict((p.name, p) for p in profiles)

    @property
    def mig_mode_persists_across_reboot(self) -> bool:
        """Ampere keeps MIG mode in the InfoROM; Hopper and later lose it on reboot (docs/reference/specs.md §4.1)."""
        return self.architecture == 'ampere'

    @property
    def engine_totals(self) -> Engines:
        """Media engines of the whole GPU: what the largest profiles take (docs/reference/specs.md §2.16)."""
        return tuple(max(p.engines[i] for p in self.profiles) for i in range(len(ENGINE_NAMES)))

    def profile(self, name: str) -> Optional[MigProfile]:
        """The profile called `name` ('1g.10gb', 'MIG 1g.10gb' or a GI profile id as text)."""
        wanted = normalize_profile_name(name)
        found = self._by_name.get(wanted)
        if found is None and wanted.isdigit():
            for candidate in self.profiles:
                if candidate.gi_profile_id == int(wanted):
                    return candidate
        return found

    def profile_names(self) -> List[str]:
        return [p.name for p in self.profiles]

    def as_dict(self) -> Dict[str, object]:
        return {
            'key': self.key,
            'product_names': list(self.product_names),
            'pci_device_ids': list(self.pci_device_ids),
            'architecture': self.architecture,
            'memory_slices': self.memory_slices,
            'compute_slices': self.compute_slices,
            'max_instances': self.max_instances,
            'mig_mode_persists_across_reboot': self.mig_mode_persists_across_reboot,
            'engines': dict(zip(ENGINE_NAMES, self.engine_totals)),
            'profiles': [p.as_dict() for p in self.profiles],
            'balanced': dict(self.balanced),
            'verified_placements': self.verified_placements,
            'namings': [list(names) for names in self.namings],
        }

    def __repr__(self) -> str:
        return 'GpuModel(%s)' % self.key


def normalize_profile_name(name: str) -> str:
    """'MIG 1g.10gb' and ' 1G.10GB ' both become '1g.10gb'."""
    text = str(name).strip()
    if text[:4].upper() == 'MIG ':
        text = text[4:].strip()
    return text.lower()


def compute_instance_profile(name: str) -> Optional[Tuple[str, str]]:
    """'1c.3g.40gb' -> ('1c', '3g.40gb'): a compute-instance profile inside a GI profile; else None."""
    match = re.match(r'^(\d+c)\.(\d+g\..+)$', normalize_profile_name(name))
    return (match.group(1), match.group(2)) if match else None


# The 8-memory-slice family (A100, H100, H200, GH200, B200, GB200, B300, GB300) shares one
# geometry; only names, sizes, SM counts and media engines differ. Rows: class, nvidia-smi GI
# profile id, max instances, memory slices, compute slices, allowed starts. The class is the
# compute size plus the variant: '1g2m' is the one-compute-slice profile with two memory slices
# ('1g.10gb' on A100-40GB); '+me', '+me.all', '-me' and '+gfx' are NVIDIA's variant suffixes.
# [docs/reference/specs.md §3.1 canonical -lgipp, 3.2 rules as data; VERIFIED for H200 by
# tests/fixtures/h200/mig_lgipp.txt]
GeometryRow = Tuple[str, int, int, int, int, Tuple[int, ...]]

_EIGHT_SLICE_GEOMETRY: Tuple[GeometryRow, ...] = (
    ('1g', 19, 7, 1, 1, (0, 1, 2, 3, 4, 5, 6)),
    ('1g+me', 20, 1, 1, 1, (0, 1, 2, 3, 4, 5, 6)),
    ('1g2m', 15, 4, 2, 1, (0, 2, 4, 6)),
    ('2g', 14, 3, 2, 2, (0, 2, 4)),
    ('3g', 9, 2, 4, 3, (0, 4)),
    ('4g', 5, 1, 4, 4, (0,)),
    ('7g', 0, 1, 8, 7, (0,)),
)

# A30: 4 memory slices, 4 compute slices; its nvidia-smi profile ids differ. [docs/reference/specs.md §2.9, S10 -lgipp]
_FOUR_SLICE_GEOMETRY: Tuple[GeometryRow, ...] = (
    ('1g', 14, 4, 1, 1, (0, 1, 2, 3)),
    ('1g+me', 21, 1, 1, 1, (0, 1, 2, 3)),
    ('2g', 5, 2, 2, 2, (0, 2)),
    ('2g+me', 6, 1, 2, 2, (0, 2)),
    ('4g', 0, 1, 4, 4, (0,)),
)

# RTX PRO 6000 Blackwell: 4 memory and 4 compute slices; ids and maxima from its -lgip, starts
# DERIVED from the A30 pattern (no -lgipp published). [docs/reference/specs.md §2.15]
_RTX_PRO_GEOMETRY: Tuple[GeometryRow, ...] = (
    ('1g', 14, 4, 1, 1, (0, 1, 2, 3)),
    ('1g+me', 21, 1, 1, 1, (0, 1, 2, 3)),
    ('1g+gfx', 47, 4, 1, 1, (0, 1, 2, 3)),
    ('1g+me.all', 65, 1, 1, 1, (0, 1, 2, 3)),
    ('1g-me', 67, 4, 1, 1, (0, 1, 2, 3)),
    ('2g', 5, 2, 2, 2, (0, 2)),
    ('2g+gfx', 35, 2, 2, 2, (0, 2)),
    ('2g+me.all', 64, 1, 2, 2, (0, 2)),
    ('2g-me', 66, 2, 2, 2, (0, 2)),
    ('4g', 0, 1, 4, 4, (0,)),
    ('4g+gfx', 32, 1, 4, 4, (0,)),
)

# Media engines per class, (NVDEC, JPEG, OFA) [docs/reference/specs.md §2.16]:
# A100 and A30 from S1's tables; Hopper from S1's H100 table and the H200 capture (the Blackwell
# data-center parts print the same columns, S9); RTX PRO 6000 from its -lgip (S9).
_AMPERE_ENGINES: Dict[str, Engines] = {
    '1g': (0, 0, 0), '1g+me': (1, 1, 1), '1g2m': (1, 0, 0), '2g': (1, 0, 0), '3g': (2, 0, 0),
    '4g': (2, 0, 0), '7g': (5, 1, 1)}
_A30_ENGINES: Dict[str, Engines] = {
    '1g': (0, 0, 0), '1g+me': (1, 1, 1), '2g': (2, 0, 0), '2g+me': (2, 1, 1), '4g': (4, 1, 1)}
_HOPPER_ENGINES: Dict[str, Engines] = {
    '1g': (1, 1, 0), '1g+me': (1, 1, 1), '1g2m': (1, 1, 0), '2g': (2, 2, 0), '3g': (3, 3, 0),
    '4g': (4, 4, 0), '7g': (7, 7, 1)}
_RTX_PRO_ENGINES: Dict[str, Engines] = {
    '1g': (1, 1, 0), '1g+me': (1, 1, 1), '1g+gfx': (1, 1, 0), '1g+me.all': (4, 4, 1), '1g-me': (0, 0, 0),
    '2g': (2, 2, 0), '2g+gfx': (2, 2, 0), '2g+me.all': (4, 4, 1), '2g-me': (0, 0, 0),
    '4g': (4, 4, 1), '4g+gfx': (4, 4, 1)}


def _base_class(geometry_class: str) -> str:
    """'1g2m+me' -> '1g2m', '2g-me' -> '2g': the part that sizes, names and SM counts are keyed by."""
    return re.match(r'^\d+g(?:2m)?', geometry_class).group(0)


def _profile_name(geometry_class: str, sizes_gb: Dict[str, str]) -> str:
    base = _base_class(geometry_class)
    return '%s.%sgb%s' % (base[:base.index('g') + 1], sizes_gb[base], geometry_class[len(base):])


def _build_profiles(geometry: Tuple[GeometryRow, ...], sizes_gb: Dict[str, str],
                    memory_gib: Dict[str, Optional[float]], multiprocessors: Dict[str, Optional[int]],
                    engines: Dict[str, Engines]) -> Tuple[MigProfile, ...]:
    """Profiles of one model, one per geometry row."""
    profiles = []
    for geometry_class, gi_id, max_count, mem, compute, starts in geometry:
        base = _base_class(geometry_class)
        profiles.append(MigProfile(
            name=_profile_name(geometry_class, sizes_gb),
            gi_profile_id=gi_id,
            max_instances=max_count,
            memory_slices=mem,
            compute_slices=compute,
            starts=starts,
            memory_gib=memory_gib.get(base),
            multiprocessors=multiprocessors.get(base),
            engines=engines[geometry_class],
        ))
    return tuple(profiles)


def _eight_slice_model(key: str, product_names: Tuple[str, ...], pci_device_ids: Tuple[str, ...],
                       architecture: str, sizes_gb: Tuple[str, ...], memory_gib: Dict[str, Optional[float]],
                       multiprocessors: Dict[str, Optional[int]], balanced: Dict[str, int],
                       verified_placements: bool, variant: Optional[Tuple[Tuple[str, ...], Dict[str, Any]]] = None) -> GpuModel:
    """An 8-slice model; `variant` (sizes, GiB per class) adds the profiles that boards printing other
    sizes name differently, with the two name sets as the model's `namings`."""
    engines = _AMPERE_ENGINES if architecture == 'ampere' else _HOPPER_ENGINES
    profiles = _build_profiles(_EIGHT_SLICE_GEOMETRY, _gib(*sizes_gb), memory_gib, multiprocessors, engines)
    namings: Tuple[Tuple[str, ...], ...] = ()
    if variant is not None:
        names = set(p.name for p in profiles)
        other = tuple(p for p in _build_profiles(_EIGHT_SLICE_GEOMETRY, _gib(*variant[0]), variant[1],
                                                 multiprocessors, engines) if p.name not in names)
        renamed = set(p.gi_profile_id for p in other)
        namings = (tuple(p.name for p in profiles if p.gi_profile_id in renamed), tuple(p.name for p in other))
        profiles += other
    return GpuModel(
        key=key, product_names=tuple(product_names), pci_device_ids=tuple(pci_device_ids),
        architecture=architecture, memory_slices=8, compute_slices=7, max_instances=7,
        profiles=profiles, balanced=balanced, verified_placements=verified_placements, namings=namings)


def _gib(*values: Any) -> Dict[str, Any]:
    """Per-class values in the order 1g, two-slice 1g, 2g, 3g, 4g, 7g."""
    return dict(zip(('1g', '1g2m', '2g', '3g', '4g', '7g'), values))


_HOPPER_SM = _gib(16, 26, 32, 60, 64, 132)  # H100/H200 -lgip SM column [docs/reference/specs.md §2.3, 2.6; H200 capture]
_AMPERE_SM = _gib(14, 14, 28, 42, 56, 98)   # A100 [docs/reference/specs.md §2.1, 2.2]
_UNKNOWN = _gib(None, None, None, None, None, None)


MODELS: Tuple[GpuModel, ...] = (
    GpuModel(
        key='A30',
        product_names=('NVIDIA A30',),
        pci_device_ids=('0x20B710DE',),
        architecture='ampere', memory_slices=4, compute_slices=4, max_instances=4,
        profiles=_build_profiles(_FOUR_SLICE_GEOMETRY, {'1g': '6', '2g': '12', '4g': '24'},
                                 {'1g': 5.81, '2g': 11.69, '4g': 23.44},
                                 {'1g': 14, '2g': 28, '4g': 56}, _A30_ENGINES),
        balanced={'1g.6gb': 2, '2g.12gb': 1},
        verified_placements=True),  # S10 A30 -lgipp
    _eight_slice_model(
        'A100-40GB',
        ('NVIDIA A100-SXM4-40GB', 'NVIDIA A100-PCIE-40GB', 'NVIDIA A800 40GB PCIe'),
        ('0x20B010DE', '0x20B110DE', '0x20F110DE', '0x20F610DE'),
        'ampere', ('5', '10', '10', '20', '20', '40'),
        _gib(4.75, 9.62, 9.62, 19.50, 19.50, 39.25), _AMPERE_SM,
        {'1g.5gb': 2, '2g.10gb': 1, '3g.20gb': 1}, True),  # S2 -lgipp
    _eight_slice_model(
        'A100-80GB',
        ('NVIDIA A100-SXM4-80GB', 'NVIDIA A100 80GB PCIe', 'NVIDIA A100-PCIE-80GB',
         'NVIDIA A800-SXM4-80GB', 'NVIDIA A800 80GB PCIe'),
        ('0x20B210DE', '0x20B510DE', '0x20F310DE', '0x20F510DE'),
        'ampere', ('10', '20', '20', '40', '40', '80'),
        _gib(9.50, 19.50, 19.50, 39.25, 39.25, 78.75), _AMPERE_SM,
        {'1g.10gb': 2, '2g.20gb': 1, '3g.40gb': 1}, False),  # placements DERIVED (docs/reference/specs.md §2.2)
    _eight_slice_model(
        'H100-80GB',
        ('NVIDIA H100 80GB HBM3', 'NVIDIA H100 PCIe', 'NVIDIA H800', 'NVIDIA H800 PCIe'),
        ('0x233010DE', '0x233110DE', '0x232210DE', '0x232410DE'),
        'hopper', ('10', '20', '20', '40', '40', '80'),
        _gib(9.75, 19.62, 19.62, 39.50, 39.50, 79.25), _HOPPER_SM,
        {'1g.10gb': 2, '2g.20gb': 1, '3g.40gb': 1}, True),  # S10 real -lgipp
    _eight_slice_model(
        'H100-NVL',
        ('NVIDIA H100 NVL', 'NVIDIA H800 NVL'),
        ('0x232110DE', '0x233A10DE'),
        'hopper', ('12', '24', '24', '47', '47', '94'),
        _gib(10.75, 21.62, 21.62, 46.38, 46.38, 93.12), _HOPPER_SM,
        {'1g.12gb': 2, '2g.24gb': 1, '3g.47gb': 1}, True),  # S10 real -lgipp
    _eight_slice_model(
        'H100-96GB',
        ('NVIDIA H100 96GB HBM3', 'NVIDIA GH200 480GB', 'NVIDIA GH200 120GB', 'NVIDIA H20'),
        ('0x233D10DE', '0x234210DE', '0x232910DE'),
        'hopper', ('12', '24', '24', '48', '48', '96'), _UNKNOWN, {},
        {'1g.12gb': 2, '2g.24gb': 1, '3g.48gb': 1}, False),  # DERIVED (docs/reference/specs.md §2.5)
    # PG506-232 is a GA100 (Ampere) board that mig-parted files with the 96GB Hopper parts because
    # its profile names are the same (docs/reference/specs.md §2.12): same layouts, own architecture.
    _eight_slice_model(
        'PG506-96GB',
        ('NVIDIA PG506-96GB', 'NVIDIA PG506-232'),
        ('0x20B610DE',),
        'ampere', ('12', '24', '24', '48', '48', '96'), _UNKNOWN, {},
        {'1g.12gb': 2, '2g.24gb': 1, '3g.48gb': 1}, False),  # DERIVED (docs/reference/specs.md §2.12)
    _eight_slice_model(
        'H200',
        ('NVIDIA H200', 'NVIDIA H200 NVL'),
        ('0x233510DE', '0x233B10DE'),
        'hopper', ('18', '35', '35', '71', '71', '141'),
        _gib(16.00, 32.50, 32.50, 69.75, 69.75, 140.00), _HOPPER_SM,  # real H200 capture
        {'1g.18gb': 2, '2g.35gb': 1, '3g.71gb': 1}, True),  # tests/fixtures/h200/mig_lgipp.txt
    _eight_slice_model(
        'GH200-144GB',
        ('NVIDIA GH200 144G HBM3e',),
        ('0x234810DE',),
        'hopper', ('18', '36', '36', '72', '72', '144'),
        _gib(17.50, 35.25, 35.25, None, None, None), _gib(16, 26, 32, None, None, None),
        {'1g.18gb': 2, '2g.36gb': 1, '3g.72gb': 1}, False),  # DERIVED (docs/reference/specs.md §2.7)
    _eight_slice_model(
        'B200',
        ('NVIDIA B200',),
        ('0x290110DE',),
        'blackwell', ('23', '45', '45', '90', '90', '180'),
        _gib(22.00, 44.25, 44.25, None, None, None), _gib(18, 30, 36, None, None, None),
        {'1g.23gb': 2, '2g.45gb': 1, '3g.90gb': 1}, False),  # DERIVED (docs/reference/specs.md §2.8)
    _eight_slice_model(
        'GB200',
        ('NVIDIA GB200',),
        ('0x294110DE',),
        'blackwell', ('23', '47', '47', '93', '93', '186'),
        _gib(22.00, 45.50, 45.50, None, None, None), _gib(18, 32, 38, None, None, None),
        {'1g.23gb': 2, '2g.47gb': 1, '3g.93gb': 1}, False,  # DERIVED (docs/reference/specs.md §2.13)
        # Boards that print 1g.24gb, 3g.95gb, 4g.95gb and 7g.189gb for the same geometry: the -lgip in
        # NVIDIA/gpu-operator#1303 and NVIDIA/mig-parted 89dd81a3 ("add support for HGX GB200"); NVIDIA's
        # default config still lists all-3g.95gb, all-4g.95gb and all-7g.189gb (mig-parted v0.15.0
        # deployments/systemd/config-default.yaml) next to the names of mig-parted#227 / ebab1f77.
        variant=(('24', '47', '47', '95', '95', '189'), _gib(20.00, 45.50, 45.50, None, None, None))),
    _eight_slice_model(
        'B300',
        ('NVIDIA B300 SXM6 AC',),
        ('0x318210DE',),
        'blackwell', ('34', '67', '67', '135', '135', '269'), _UNKNOWN, {},
        {'1g.34gb': 2, '2g.67gb': 1, '3g.135gb': 1}, False),  # DERIVED (docs/reference/specs.md §2.14)
    _eight_slice_model(
        'GB300',
        ('NVIDIA GB300',),
        ('0x31C210DE',),
        'blackwell', ('35', '70', '70', '139', '139', '278'), _UNKNOWN, {},
        # 1g.35gb+me: NVIDIA/mig-parted 75449116 "add the mig profiles for GB300" (all-1g.35gb.me in
        # v0.15.0 deployments/systemd/config-default.yaml and in NVIDIA/gpu-operator v26.7.0
        # assets/state-mig-manager/0400_configmap.yaml); rest DERIVED (docs/reference/specs.md §2.14)
        {'1g.35gb': 2, '2g.70gb': 1, '3g.139gb': 1}, False),
    GpuModel(
        key='RTX-PRO-6000',
        product_names=('NVIDIA RTX PRO 6000 Blackwell Server Edition',
                       'NVIDIA RTX PRO 6000 Blackwell Workstation Edition',
                       'NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition'),
        pci_device_ids=('0x2BB510DE', '0x2BB110DE'),
        architecture='blackwell', memory_slices=4, compute_slices=4, max_instances=4,
        profiles=_build_profiles(_RTX_PRO_GEOMETRY, {'1g': '24', '2g': '48', '4g': '96'},
                                 {'1g': 23.62, '2g': 47.38, '4g': 95.00},
                                 {'1g': 46, '2g': 94, '4g': 188}, _RTX_PRO_ENGINES),
        balanced={'1g.24gb': 2, '2g.48gb': 1},
        verified_placements=False),  # DERIVED starts (docs/reference/specs.md §2.15)
)
MODELS_BY_KEY: Dict[str, GpuModel] = dict((m.key, m) for m in MODELS)
_BY_PCI_ID: Dict[str, GpuModel] = dict((pci, m) for m in MODELS for pci in m.pci_device_ids)


def _product_key(name: str) -> str:
    """Compare product names loosely: case, 'NVIDIA ' prefix, spaces and dashes do not matter."""
    text = name.strip().lower()
    if text.startswith('nvidia '):
        text = text[len('nvidia '):]
    return re.sub(r'[\s_-]+', '', text)


_BY_PRODUCT: Dict[str, GpuModel] = dict((_product_key(n), m) for m in MODELS for n in m.product_names)
_BY_KEY_LOWER: Dict[str, GpuModel] = dict((m.key.lower(), m) for m in MODELS)
_FOUND: Memo[Optional[GpuModel]] = Memo()


def normalize_pci_device_id(text: str) -> Optional[str]:
    """'0x233010de', '233010DE', '0x2330' and '2330' all become '0x233010DE' (device + NVIDIA vendor)."""
    raw = text.strip().lower()
    if raw.startswith('0x'):
        raw = raw[2:]
    if not re.match(r'^[0-9a-f]{4}([0-9a-f]{4})?$', raw):
        return None
    if len(raw) == 4:
        raw += '10de'
    return '0x' + raw.upper()


def find_model(identifier: str, pci_device_id: Optional[str] = None) -> Optional[GpuModel]:
    """The model for a short key, a product name as nvidia-smi prints it, or a PCI device id.

    When both a product name and a PCI device id are known, the PCI id wins (product names vary
    by board and driver; the id does not). Returns None when nothing matches. Looked up once per
    name and id (a fleet names a few models on thousands of GPUs).
    """
    plain = all(v is None or isinstance(v, str) for v in (identifier, pci_device_id))
    return _FOUND.get((identifier, pci_device_id) if plain else None, lambda: _find_model(identifier, pci_device_id))


def _find_model(identifier: str, pci_device_id: Optional[str]) -> Optional[GpuModel]:
    if pci_device_id:
        pci = normalize_pci_device_id(pci_device_id)
        if pci and pci in _BY_PCI_ID:
            return _BY_PCI_ID[pci]
    text = str(identifier or '').strip()
    if not text:
        return None
    by_key = _BY_KEY_LOWER.get(text.lower())
    if by_key is not None:
        return by_key
    pci = normalize_pci_device_id(text)
    if pci is not None and pci in _BY_PCI_ID:
        return _BY_PCI_ID[pci]
    return _BY_PRODUCT.get(_product_key(text))


def resolve_model(identifier: str, pci_device_id: Optional[str] = None) -> GpuModel:
    """Like find_model, but raise CatalogError naming the known models when nothing matches."""
    model = find_model(identifier, pci_device_id)
    if model is None:
        raise CatalogError(
            "unknown MIG-capable GPU model %r%s; known models: %s (or a product name as nvidia-smi "
            "prints it, or a PCI device id such as 0x233010DE)" % (
                identifier, ' (PCI device id %s)' % pci_device_id if pci_device_id else '',
                ', '.join(m.key for m in MODELS)))
    return model
