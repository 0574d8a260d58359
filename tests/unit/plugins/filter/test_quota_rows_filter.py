"""quota_rows: the rollout summary's team rows from the shrink run and the last run."""

from __future__ import annotations

from ansible_collections.gpufleet.sharing.plugins.filter.quota_rows import quota_rows


def test_rows_take_before_and_shrunk_from_the_shrink_run():
    shrink = [{"team": "a", "before": {"r": 7}, "after": {"r": 2, "s": 0}}]
    grow = [{"team": "a", "before": {"r": 2, "s": 0}, "after": {"r": 2, "s": 1}},
            {"team": "new", "before": {}, "after": {"r": 1}}]
    assert quota_rows(grow, shrink) == [
        {"team": "a", "before": {"r": 7}, "shrunk": {"r": 2, "s": 0}, "after": {"r": 2, "s": 1}},
        {"team": "new", "before": {}, "shrunk": {}, "after": {"r": 1}}]


def test_without_a_shrink_run_or_teams():
    assert quota_rows([{"team": "a", "before": {"r": 1}, "after": {"r": 1}}]) == [
        {"team": "a", "before": {"r": 1}, "shrunk": {"r": 1}, "after": {"r": 1}}]
    assert quota_rows(None, None) == [] and quota_rows([], []) == []
