# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Validate a MIG layout for a GPU model and plan it: placements, creation order, resources.

A layout is a mapping profile name -> instance count for ONE GPU. Pure functions, no I/O.

Geometry rules (docs/reference/specs.md §3.2): every GPU instance needs an allowed start on the memory-slice axis
with no two instances overlapping; the compute slices of all instances must fit the GPU; no
profile may exceed its maximum count. The planner finds explicit placements by a backtracking
search over bit masks, which is exhaustive (a layout is rejected only when no placement exists).
The media engines (video and JPEG decoders, optical-flow accelerators) that the instances take must
also exist on the GPU (docs/reference/specs.md §2.16): an A30 has one JPEG decoder and one OFA, so it
holds at most one `+me` instance of any size.

What a whole node advertises to Kubernetes is answered in one place, `_sharing.expected_node`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Dict, Iterable, List, Optional, Tuple

from ansible_collections.gpufleet.sharing.plugins.module_utils.gpu._mig_catalog import (
    ENGINE_NAMES,
    GpuModel,
    MigProfile,
    compute_instance_profile,
)

STRATEGIES = ('none', 'single', 'mixed')
RESOURCE_PREFIX = 'nvidia.com/'


class LayoutError(ValueError):
    """A layout cannot be realised on the GPU model; `problems` explains every reason found."""

    def __init__(self, model_key: str, problems: List[str]) -> None:
        self.model_key = model_key
        self.problems = list(problems)
        super().__init__('; '.join(self.problems))


class Placement:
    """One GPU instance at a fixed position on the memory-slice axis."""

    __slots__ = ('profile', 'start', 'size')

    def __init__(self, profile: str, start: int, size: int) -> None:
        self.profile = profile
        self.start = start
        self.size = size

    def as_dict(self) -> Dict[str, object]:
        return {'profile': self.profile, 'start': self.start, 'size': self.size}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Placement) and (self.profile, self.start, self.size) == (
            other.profile, other.start, other.size)

    def __hash__(self) -> int:
        return hash((self.profile, self.start, self.size))

    def __repr__(self) -> str:
        return '%s@%d:%d' % (self.profile, self.start, self.size)


class GpuPlan:
    """The plan for one GPU of one model: where every instance goes and in which order."""

    __slots__ = ('model', 'layout', 'placements', 'unused_memory_slices', 'unused_compute_slices')

    def __init__(self, model: GpuModel, layout: Dict[str, int], placements: Tuple[Placement, ...]) -> None:
        self.model = model
        self.layout = layout
        self.placements = placements
        used_memory = 0
        for placement in placements:
            used_memory |= _mask(placement.start, placement.size)
        self.unused_memory_slices = tuple(
            s for s in range(model.memory_slices) if not used_memory & (1 << s))
        used_compute = sum(model.profile(p.profile).compute_slices for p in placements)
        self.unused_compute_slices = model.compute_slices - used_compute

    @property
    def creation_order(self) -> Tuple[str, ...]:
        """nvidia-smi `-cgi` tuples with explicit starts, largest instance first.

        Explicit starts sidestep the driver's ordering issue (docs/reference/specs.md §3.2: `-cgi 19,19,14,9` fails
        while `-cgi 9,19,14,19` succeeds); largest-first matches nvidia-mig-parted's own order.
        """
        return tuple('%s:%d' % (p.profile, p.start) for p in self.placements)

    def resources(self, strategy: str) -> Optional[Dict[str, int]]:
        """Extended resources this GPU yields under a device-plugin MIG strategy (docs/reference/specs.md §9.1).

        `none` exposes no MIG device; `single` is possible only with one profile (None otherwise);
        `mixed` names one resource per profile ('+' becomes '.').
        """
        if strategy not in STRATEGIES:
            raise ValueError('unknown MIG strategy %r; expected one of %s' % (strategy, ', '.join(STRATEGIES)))
        if strategy == 'none':
            return {}
        counts = dict((name, count) for name, count in self.layout.items() if count > 0)
        if strategy == 'single':
            if len(counts) > 1:
                return None
            return {RESOURCE_PREFIX + 'gpu': sum(counts.values())} if counts else {}
        return dict((mixed_resource_name(name), count) for name, count in sorted(counts.items()))

    @property
    def single_possible(self) -> bool:
        return self.resources('single') is not None

    def as_dict(self) -> Dict[str, object]:
        return {
            'model': self.model.key,
            'layout': dict(self.layout),
            'placements': [p.as_dict() for p in self.placements],
            'creation_order': list(self.creation_order),
            'unused_memory_slices': list(self.unused_memory_slices),
            'unused_compute_slices': self.unused_compute_slices,
            'resources': {
                'mixed': self.resources('mixed'),
                'single': self.resources('single'),
            },
            'single_possible': self.single_possible,
        }


def mixed_resource_name(profile_name: str) -> str:
    return '%smig-%s' % (RESOURCE_PREFIX, profile_name.replace('+', '.'))


def _mask(start: int, size: int) -> int:
    return ((1 << size) - 1) << start


def _slice_list(mask: int, width: int) -> str:
    taken = [str(s) for s in range(width) if mask & (1 << s)]
    return ','.join(taken) if taken else 'none'


def _starts_text(profile: MigProfile) -> str:
    if len(profile.starts) == 1:
        return 'can only start at memory slice %d' % profile.starts[0]
    return 'can start at memory slices %s' % ', '.join(str(s) for s in profile.starts)


def normalize_layout(model: GpuModel, layout: Mapping[str, object]) -> Tuple[Dict[str, int], List[str]]:
    """Canonical profile names and integer counts; problems for anything that is not."""
    problems: List[str] = []
    result: Dict[str, int] = {}
    if not isinstance(layout, Mapping):
        return result, ['the layout must be a mapping of profile name to count, got %s' % type(layout).__name__]
    for raw_name, raw_count in layout.items():
        profile = model.profile(str(raw_name))
        if profile is None and compute_instance_profile(str(raw_name)):
            problems.append(_compute_instance_problem(model, str(raw_name)))
            continue
        if profile is None:
            problems.append('profile %r is not a MIG profile of %s; valid profiles: %s' % (
                raw_name, model.key, ', '.join(model.profile_names())))
            continue
        if isinstance(raw_count, bool) or not isinstance(raw_count, int):
            try:
                count = int(str(raw_count).strip())
            except ValueError:
                problems.append('count for %s must be a whole number, got %r' % (profile.name, raw_count))
                continue
        else:
            count = raw_count
        if count < 0:
            problems.append('count for %s must not be negative, got %d' % (profile.name, count))
            continue
        result[profile.name] = result.get(profile.name, 0) + count
    return result, problems


def _compute_instance_problem(model: GpuModel, raw_name: str) -> str:
    compute, gpu_instance = compute_instance_profile(raw_name)
    return ('profile %r is a compute-instance profile (%s of the GPU instance %s): not supported, because '
            'the collection gives every GPU instance one compute instance spanning all of it - that is what '
            'mig_config creates and what the device plugin then advertises as nvidia.com/mig-<GPU instance '
            'profile>; several compute instances in one GPU instance would share its memory and are neither '
            'planned, applied nor verified. Use the GPU-instance profile (%s) instead; valid profiles of %s: %s' % (
                raw_name, compute, gpu_instance, gpu_instance, model.key, ', '.join(model.profile_names())))


_ENGINE_TEXT = {'decoders': 'video decoders (NVDEC)', 'jpeg': 'JPEG decoders', 'ofa': 'optical-flow accelerators (OFA)'}


def _engine_problems(model: GpuModel, counts: Dict[str, int]) -> List[str]:
    """Media engines the instances take beyond what the GPU has (docs/reference/specs.md §2.16)."""
    problems = []
    for index, engine in enumerate(ENGINE_NAMES):
        total = model.engine_totals[index]
        takers = [(n, c, model.profile(n).engines[index]) for n, c in sorted(counts.items())
                  if c and model.profile(n).engines[index]]
        needed = sum(count * each for _name, count, each in takers)
        if needed > total:
            problems.append('the layout needs %d %s but %s has %d (%s); %s' % (
                needed, _ENGINE_TEXT[engine], model.key, total,
                ', '.join('%d x %s takes %d' % (c, n, c * each) for n, c, each in takers),
                'a +me.all instance takes every media engine, so it shares the GPU only with -me instances'
                if any(name.endswith('+me.all') for name, _count, _each in takers)
                else 'at most one instance with media extensions (+me) fits on it'))
    return problems


def _capacity_problems(model: GpuModel, counts: Dict[str, int]) -> List[str]:
    problems = []
    for name, count in sorted(counts.items()):
        profile = model.profile(name)
        if count > profile.max_instances:
            problems.append('%d x %s requested but %s allows at most %d %s instance%s' % (
                count, name, model.key, profile.max_instances, name,
                '' if profile.max_instances == 1 else 's'))
    total = sum(counts.values())
    if total > model.max_instances:
        problems.append('%d GPU instances requested but %s supports at most %d' % (
            total, model.key, model.max_instances))
    compute = sum(model.profile(n).compute_slices * c for n, c in counts.items())
    if compute > model.compute_slices:
        problems.append('the layout needs %d compute slices but %s has %d' % (
            compute, model.key, model.compute_slices))
    memory = sum(model.profile(n).memory_slices * c for n, c in counts.items())
    if memory > model.memory_slices:
        problems.append('the layout needs %d memory slices but %s has %d' % (
            memory, model.key, model.memory_slices))
    return problems + _engine_problems(model, counts) + _naming_problems(model, counts)


def board_naming_problems(model: GpuModel, current: Mapping[str, int], wanted: Mapping[str, int]) -> List[str]:
    """Profiles of another naming than the one a board's GPU instances show (``current``, as nvidia-smi
    lists them): a board prints one of the model's name sets (GB200, docs/reference/specs.md §2.13)."""
    shown = [names for names in model.namings if any(current.get(n) for n in names)]
    if len(shown) != 1:
        return []
    own = shown[0]
    problems = []
    for names in model.namings:
        for name in (n for n in names if names is not own and wanted.get(n)):
            problems.append('this board prints the %s profile names %s (its GPU instances are %s), so %s does not '
                            'exist on it: use %s' % (model.key, ', '.join(own), ', '.join(
                                sorted(n for n in current if current.get(n))), name, own[names.index(name)]))
    return problems


def _naming_problems(model: GpuModel, counts: Dict[str, int]) -> List[str]:
    """A board prints one of the model's name sets (GB200, docs/reference/specs.md §2.13), never both."""
    used = [[n for n in names if counts.get(n)] for names in model.namings]
    used = [names for names in used if names]
    if len(used) < 2:
        return []
    return ['the layout mixes profile names of two kinds of %s board (%s and %s): a board prints either %s or %s, '
            'so use the names its nvidia-smi mig -lgip lists' % (
                model.key, ', '.join(used[0]), ', '.join(used[1]),
                ', '.join(model.namings[0]), ', '.join(model.namings[1]))]


def _instances_largest_first(model: GpuModel, counts: Dict[str, int]) -> List[MigProfile]:
    """Expand counts to instances: big and constrained ones first, which prunes the search."""
    profiles = [profile for n, c in counts.items() for profile in [model.profile(n)] * c]
    profiles.sort(key=lambda p: (-p.memory_slices, -p.compute_slices, len(p.starts), p.name))
    return profiles


def _search(instances: List[MigProfile], width: int) -> Tuple[Optional[List[int]], int, int]:
    """Backtracking placement search.

    Returns (starts or None, index of the deepest instance that could not be placed, the
    occupied mask at that point) so that a failure can be explained.
    """
    full = (1 << width) - 1
    starts = [0] * len(instances)
    deepest = [0, 0]  # [index, occupied mask] of the furthest failure

    def place(i: int, occupied: int) -> bool:
        if i == len(instances):
            return True
        profile = instances[i]
        previous_same = i > 0 and instances[i - 1] is profile
        for start in profile.starts:
            # Identical instances are interchangeable: keep their starts increasing.
            if previous_same and start <= starts[i - 1]:
                continue
            mask = _mask(start, profile.memory_slices)
            if mask & occupied or mask & ~full:
                continue
            starts[i] = start
            if place(i + 1, occupied | mask):
                return True
        if i >= deepest[0]:
            deepest[0], deepest[1] = i, occupied
        return False

    if place(0, 0):
        return starts, -1, 0
    return None, deepest[0], deepest[1]


def plan_layout(model: GpuModel, layout: Mapping[str, object]) -> GpuPlan:
    """Validate `layout` for `model` and return its plan, or raise LayoutError explaining why not."""
    counts, problems = normalize_layout(model, layout)
    if problems:
        raise LayoutError(model.key, problems)
    problems = _capacity_problems(model, counts)
    if problems:
        raise LayoutError(model.key, problems)
    instances = _instances_largest_first(model, counts)
    starts, failed_index, occupied = _search(instances, model.memory_slices)
    if starts is None:
        profile = instances[failed_index]
        raise LayoutError(model.key, [
            'no non-overlapping placement exists: %s %s (size %d) and every start it allows is '
            'already taken by the larger instances (memory slices %s in use)' % (
                profile.name, _starts_text(profile), profile.memory_slices,
                _slice_list(occupied, model.memory_slices))])
    placements = tuple(Placement(p.name, s, p.memory_slices) for p, s in zip(instances, starts))
    return GpuPlan(model, dict((n, c) for n, c in counts.items() if c > 0), placements)


def check_layout(model: GpuModel, layout: Mapping[str, object]) -> List[str]:
    """The problems of a layout (empty when it is valid)."""
    try:
        plan_layout(model, layout)
    except LayoutError as error:
        return error.problems
    return []


def layout_of_placements(placements: Iterable[Placement]) -> Dict[str, int]:
    counts: Dict[str, int] = {}
    for placement in placements:
        counts[placement.profile] = counts.get(placement.profile, 0) + 1
    return counts
