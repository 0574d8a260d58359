"""Benchmark: how fast the MIG planner validates layouts (issue: well over 10,000 per second).

Usage: .venv/bin/python tests/bench/bench_planner.py [--layouts 10000] [--seed 7] [--json FILE]

Draws layouts at random over every catalog model (counts 0..max+1 per profile, so about a third
are rejected, each with its explanation), then times three things in the same run:
  baseline  - normalize_layout only (profile lookup and count parsing: the unavoidable input cost)
  plan      - plan_layout (validation, placement search, plan object)
  plan+dict - plan_layout(...).as_dict() (what the mig_plan module returns)
and reports layouts per second and each figure as a ratio to the baseline.
"""
import argparse
import json
import os
import random
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, '.build'))

from ansible_collections.gpufleet.sharing.plugins.module_utils.gpu._mig_catalog import MODELS  # noqa: E402
from ansible_collections.gpufleet.sharing.plugins.module_utils.mig._mig_planner import (  # noqa: E402
    LayoutError,
    normalize_layout,
    plan_layout,
)


def random_layouts(count, seed):
    rng = random.Random(seed)
    layouts = []
    for _draw in range(count):
        model = rng.choice(MODELS)
        chosen = rng.sample(model.profiles, rng.randint(1, 3))
        layouts.append((model, dict((p.name, rng.randint(0, p.max_instances + 1)) for p in chosen)))
    return layouts


def timed(function, layouts, repeat=3):
    best = None
    for _attempt in range(repeat):
        start = time.perf_counter()
        for model, layout in layouts:
            function(model, layout)
        elapsed = time.perf_counter() - start
        best = elapsed if best is None or elapsed < best else best
    return best


def plan_only(model, layout):
    try:
        plan_layout(model, layout)
    except LayoutError:
        pass


def plan_dict(model, layout):
    try:
        plan_layout(model, layout).as_dict()
    except LayoutError:
        pass


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--layouts', type=int, default=10000)
    parser.add_argument('--seed', type=int, default=7)
    parser.add_argument('--json', help='also write the result as JSON to this file')
    options = parser.parse_args()
    layouts = random_layouts(options.layouts, options.seed)
    rejected = 0
    for model, layout in layouts:
        try:
            plan_layout(model, layout)
        except LayoutError:
            rejected += 1
    baseline = timed(normalize_layout, layouts)
    results = [('baseline (normalize only)', baseline), ('plan_layout', timed(plan_only, layouts)),
               ('plan_layout + as_dict', timed(plan_dict, layouts))]
    print('%d layouts over %d models, %d valid, %d rejected (seed %d, best of 3)' % (
        len(layouts), len(MODELS), len(layouts) - rejected, rejected, options.seed))
    print('%-28s %12s %14s %10s' % ('what', 'seconds', 'layouts/s', 'x baseline'))
    report = {'layouts': len(layouts), 'rejected': rejected, 'seed': options.seed, 'results': []}
    for name, seconds in results:
        rate = len(layouts) / seconds
        print('%-28s %12.4f %14.0f %10.2f' % (name, seconds, rate, seconds / baseline))
        report['results'].append({'what': name, 'seconds': seconds, 'layouts_per_second': rate,
                                  'ratio_to_baseline': seconds / baseline})
    print(json.dumps(report))
    if options.json:
        with open(options.json, 'w') as handle:
            json.dump(report, handle, indent=2)


if __name__ == '__main__':
    main()
