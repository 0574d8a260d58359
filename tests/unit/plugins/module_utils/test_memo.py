"""base/_memo: keys equal only for equal inputs of the same types; results kept, errors not."""

from __future__ import annotations

import pytest

from ansible_collections.gpufleet.sharing.plugins.module_utils.base._memo import Memo, frozen


def test_equal_inputs_share_a_key_whatever_the_order():
    assert frozen({"a": 1, "b": [1, {"c": None}]}) == frozen({"b": [1, {"c": None}], "a": 1})
    assert hash(frozen({"a": [1, 2.5, "x", True]})) == hash(frozen({"a": [1, 2.5, "x", True]}))


@pytest.mark.parametrize("one, other", [
    (True, 1), (1, 1.0), ([1], (1,)), ({"a": 1}, {"a": True}), ("1", 1), ({"a": [1, 2]}, {"a": [2, 1]}), (None, "None")])
def test_inputs_of_other_types_or_values_do_not(one, other):
    assert frozen(one) != frozen(other)


def test_what_cannot_be_a_key_is_none():
    assert frozen({"a": {1, 2}}) is None and frozen([object()]) is None and frozen({"a": [b"x"]}) is None


def test_a_result_is_computed_once_per_key_and_errors_are_not_kept():
    memo, calls = Memo(limit=2), []

    def compute(value):
        def run():
            calls.append(value)
            if value == "bad":
                raise ValueError(value)
            return value.upper()
        return run
    assert memo.get("k1", compute("a")) == "A" and memo.get("k1", compute("other")) == "A" and calls == ["a"]
    assert memo.get(None, compute("b")) == "B" and memo.get(None, compute("b")) == "B" and calls == ["a", "b", "b"]
    for _attempt in range(2):
        with pytest.raises(ValueError):
            memo.get("k2", compute("bad"))
    assert calls == ["a", "b", "b", "bad", "bad"]
    memo.get("k3", compute("c"))
    memo.get("k4", compute("d"))  # the table held its limit: emptied, then k4 kept
    memo.get("k1", compute("e"))
    assert calls[-3:] == ["c", "d", "e"]
    memo.clear()
    memo.get("k4", compute("f"))
    assert calls[-1] == "f"
