"""_values_tree: the one path lookup and assignment of nested chart values."""
from ansible_collections.gpufleet.sharing.plugins.module_utils.base._values_tree import get_path, set_path


def test_get_path_finds_values_including_falsy_ones():
    tree = {"a": {"b": {"c": 0}}, "n": None}
    assert get_path(tree, ("a", "b", "c")) == (True, 0)
    assert get_path(tree, ("a", "b")) == (True, {"c": 0})
    assert get_path(tree, ("n",)) == (True, None)
    assert get_path(tree, ()) == (True, tree)


def test_get_path_missing_keys_and_non_mapping_levels():
    tree = {"a": {"b": [1, 2]}, "s": "text"}
    assert get_path(tree, ("x",)) == (False, None)
    assert get_path(tree, ("a", "x")) == (False, None)
    assert get_path(tree, ("a", "b", "0")) == (False, None)
    assert get_path(tree, ("s", "t")) == (False, None)
    assert get_path(None, ("a",)) == (False, None)


def test_set_path_creates_and_replaces_levels():
    tree = {"keep": 1, "a": "scalar"}
    set_path(tree, ("a", "b"), 2)
    set_path(tree, ("x", "y", "z"), [3])
    set_path(tree, ("x", "y", "w"), 4)
    set_path(tree, ("keep",), 5)
    assert tree == {"keep": 5, "a": {"b": 2}, "x": {"y": {"z": [3], "w": 4}}}
