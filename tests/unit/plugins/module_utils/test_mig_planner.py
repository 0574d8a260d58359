"""The planner against an independent brute-force enumeration, plus its explanations."""
import pytest

from ansible_collections.gpufleet.sharing.plugins.module_utils.gpu._mig_catalog import MODELS, resolve_model
from ansible_collections.gpufleet.sharing.plugins.module_utils.mig._mig_planner import (
    LayoutError,
    check_layout,
    layout_of_placements,
    plan_layout,
)


def feasible_layouts(model):
    """Every layout that can exist on the model, found by tiling the memory-slice axis.

    Independent of the planner: walk the slices left to right; each slice is either left empty or
    is the start of an instance of a profile allowed to start there. Then keep the arrangements
    that respect the compute-slice total, per-profile maxima and the instance limit.
    """
    found = set()
    # The media engines of the whole GPU: those of a profile that spans every memory slice.
    whole_gpu_engines = max(p.engines for p in model.profiles if p.memory_slices == model.memory_slices)

    def walk(position, chosen):
        if position >= model.memory_slices:
            counts = {}
            for profile in chosen:
                counts[profile.name] = counts.get(profile.name, 0) + 1
            if sum(p.compute_slices for p in chosen) > model.compute_slices:
                return
            if len(chosen) > model.max_instances:
                return
            if any(counts[p.name] > p.max_instances for p in chosen):
                return
            if any(sum(p.engines[i] for p in chosen) > whole_gpu_engines[i] for i in range(3)):
                return
            if sum(1 for names in model.namings if set(names) & set(counts)) > 1:
                return  # a board prints one of the name sets (GB200: 1g.23gb ... or 1g.24gb ...)
            found.add(tuple(sorted(counts.items())))
            return
        walk(position + 1, chosen)
        for profile in model.profiles:
            if position in profile.starts and position + profile.memory_slices <= model.memory_slices:
                walk(position + profile.memory_slices, chosen + [profile])

    walk(0, [])
    return found


def all_count_grids(model):
    """Every count vector up to one over each maximum whose memory is at most one slice too many
    (anything larger is refused by the memory total alone, which the grid still covers at its edge)."""
    profiles = model.profiles

    def grid(index, memory):
        if index == len(profiles):
            yield {}
            return
        profile = profiles[index]
        for count in range(0, profile.max_instances + 2):
            used = memory + count * profile.memory_slices
            if used > model.memory_slices + 1:
                break
            for rest in grid(index + 1, used):
                yield dict(rest, **{profile.name: count}) if count else rest

    return grid(0, 0)


def assert_plan_is_legal(model, plan, layout):
    occupied = 0
    for placement in plan.placements:
        profile = model.profile(placement.profile)
        assert placement.start in profile.starts
        assert placement.size == profile.memory_slices
        mask = ((1 << placement.size) - 1) << placement.start
        assert not occupied & mask
        occupied |= mask
    assert layout_of_placements(plan.placements) == layout
    used_compute = sum(model.profile(p.profile).compute_slices for p in plan.placements)
    assert plan.unused_compute_slices == model.compute_slices - used_compute >= 0


@pytest.mark.parametrize('model', MODELS, ids=lambda m: m.key)
def test_every_combination_against_brute_force(model):
    feasible = feasible_layouts(model)
    accepted = 0
    for layout in all_count_grids(model):
        expected = tuple(sorted(layout.items())) in feasible
        try:
            plan = plan_layout(model, layout)
        except LayoutError as error:
            assert not expected, 'planner rejected a feasible layout %r: %s' % (layout, error)
            assert error.problems
            continue
        assert expected, 'planner accepted an impossible layout %r' % layout
        assert_plan_is_legal(model, plan, layout)
        accepted += 1
    assert accepted == len(feasible)


@pytest.mark.parametrize('model', MODELS, ids=lambda m: m.key)
def test_every_single_profile_maximum(model):
    for profile in model.profiles:
        plan = plan_layout(model, {profile.name: profile.max_instances})
        assert len(plan.placements) == profile.max_instances
        with pytest.raises(LayoutError) as error:
            plan_layout(model, {profile.name: profile.max_instances + 1})
        assert 'at most %d' % profile.max_instances in str(error.value)


@pytest.mark.parametrize('model', MODELS, ids=lambda m: m.key)
def test_balanced_layout_of_every_model(model):
    plan = plan_layout(model, model.balanced)
    assert_plan_is_legal(model, plan, model.balanced)
    assert plan.resources('single') is None
    assert sum(plan.resources('mixed').values()) == sum(model.balanced.values())


def test_issue_example_a100_40gb():
    model = resolve_model('A100-40GB')
    plan = plan_layout(model, {'4g.20gb': 1, '3g.20gb': 1})
    assert [(p.profile, p.start, p.size) for p in plan.placements] == [('4g.20gb', 0, 4), ('3g.20gb', 4, 4)]
    assert plan.creation_order == ('4g.20gb:0', '3g.20gb:4')
    assert plan.unused_memory_slices == ()
    assert plan.unused_compute_slices == 0
    with pytest.raises(LayoutError) as error:
        plan_layout(model, {'4g.20gb': 2})
    assert '2 x 4g.20gb requested but A100-40GB allows at most 1 4g.20gb instance' in str(error.value)


def test_unknown_profile_lists_valid_ones():
    with pytest.raises(LayoutError) as error:
        plan_layout(resolve_model('H100-80GB'), {'1g.5gb': 1})
    message = str(error.value)
    assert "'1g.5gb' is not a MIG profile of H100-80GB" in message
    assert '1g.10gb, 1g.10gb+me, 1g.20gb, 2g.20gb, 3g.40gb, 4g.40gb, 7g.80gb' in message


def test_compute_over_limit_is_explained():
    problems = check_layout(resolve_model('A100-40GB'), {'4g.20gb': 1, '3g.20gb': 1, '1g.5gb': 1})
    assert any('needs 8 compute slices but A100-40GB has 7' in p for p in problems)


def test_memory_over_limit_is_explained():
    problems = check_layout(resolve_model('A100-40GB'), {'3g.20gb': 2, '1g.5gb': 1})
    assert any('needs 9 memory slices but A100-40GB has 8' in p for p in problems)


@pytest.mark.parametrize('model', MODELS, ids=lambda m: m.key)
def test_no_real_model_fails_on_placement_alone(model):
    """Finding: on every catalog model, a layout whose counts, compute and memory fit can be placed.

    (1g profiles can never use the last memory slice, but the instance limit and the 2-slice
    1g profile at slice 6 always leave a way out.) The brute force shows it for every layout.
    """
    for layout in all_count_grids(model):
        problems = check_layout(model, layout)
        assert not any(p.startswith('no non-overlapping placement') for p in problems), layout


def _synthetic_model():
    """A made-up 4-slice GPU whose 2g profile may only start at slice 0, to reach the search failure."""
    from ansible_collections.gpufleet.sharing.plugins.module_utils.gpu._mig_catalog import GpuModel, MigProfile
    profiles = (MigProfile('2g.10gb', 1, 2, 2, 1, (0,)), MigProfile('1g.5gb', 2, 4, 1, 1, (0, 1, 2, 3)))
    return GpuModel('TEST', ('Test GPU',), ('0xFFFF10DE',), 'hopper', 4, 4, 4, profiles, {}, False)


def test_placement_failure_names_the_profile_and_its_starts():
    model = _synthetic_model()
    with pytest.raises(LayoutError) as error:
        plan_layout(model, {'2g.10gb': 2})
    assert error.value.problems == [
        'no non-overlapping placement exists: 2g.10gb can only start at memory slice 0 (size 2) and '
        'every start it allows is already taken by the larger instances (memory slices 0,1 in use)']
    # The same search finds the way when there is one.
    plan = plan_layout(model, {'2g.10gb': 1, '1g.5gb': 2})
    assert [(p.profile, p.start) for p in plan.placements] == [('2g.10gb', 0), ('1g.5gb', 2), ('1g.5gb', 3)]


def test_placement_failure_message_for_four_g():
    problems = check_layout(resolve_model('A30'), {'2g.12gb': 1, '2g.12gb+me': 1, '1g.6gb': 1})
    assert problems  # 4 compute + 1 > 4
    problems = check_layout(resolve_model('A100-40GB'), {'4g.20gb': 1, '7g.40gb': 1})
    assert problems


@pytest.mark.parametrize('layout, problem', [
    ({'1g.10gb': -1}, 'must not be negative'),
    ({'1g.10gb': 'two'}, 'must be a whole number'),
    ({'1g.10gb': True}, 'must be a whole number'),
])
def test_bad_counts(layout, problem):
    problems = check_layout(resolve_model('H100-80GB'), layout)
    assert any(problem in p for p in problems)


def test_counts_as_text_and_mig_prefix_are_accepted():
    plan = plan_layout(resolve_model('H100-80GB'), {'MIG 1g.10gb': '7'})
    assert plan.layout == {'1g.10gb': 7}


def test_zero_counts_are_dropped_and_empty_layout_is_valid():
    plan = plan_layout(resolve_model('H200'), {'1g.18gb': 0})
    assert plan.placements == ()
    assert plan.unused_memory_slices == tuple(range(8))
    assert plan.resources('mixed') == {}
    assert plan.resources('single') == {}


def test_resources_per_strategy():
    model = resolve_model('H100-80GB')
    balanced = plan_layout(model, {'1g.10gb': 2, '2g.20gb': 1, '3g.40gb': 1})
    assert balanced.resources('mixed') == {
        'nvidia.com/mig-1g.10gb': 2, 'nvidia.com/mig-2g.20gb': 1, 'nvidia.com/mig-3g.40gb': 1}
    assert balanced.resources('single') is None
    assert not balanced.single_possible
    assert balanced.resources('none') == {}
    uniform = plan_layout(model, {'1g.10gb': 7})
    assert uniform.resources('single') == {'nvidia.com/gpu': 7}
    media = plan_layout(model, {'1g.10gb+me': 1})
    assert media.resources('mixed') == {'nvidia.com/mig-1g.10gb.me': 1}
    with pytest.raises(ValueError):
        balanced.resources('other')


def test_as_dict():
    data = plan_layout(resolve_model('A30'), {'2g.12gb': 1, '1g.6gb': 2}).as_dict()
    assert data['model'] == 'A30'
    assert data['placements'][0] == {'profile': '2g.12gb', 'start': 2, 'size': 2} or \
        data['placements'][0] == {'profile': '2g.12gb', 'start': 0, 'size': 2}
    assert data['single_possible'] is False
