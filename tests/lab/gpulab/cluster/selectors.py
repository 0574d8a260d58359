"""Label and field selectors, as the Kubernetes API server parses and applies them.

String syntax (query parameter ``labelSelector``)::

    key=value  key==value  key!=value  key in (a,b)  key notin (a,b)  key  !key

joined by commas (AND). A ``!=``/``notin`` requirement also matches objects that lack the key,
like the real server. ``LabelSelector`` objects (``matchLabels``/``matchExpressions`` with
In/NotIn/Exists/DoesNotExist), as used by PodDisruptionBudgets and DaemonSets, go through
:func:`from_label_selector`. Field selectors support ``=``, ``==`` and ``!=`` only, on the fields
each resource type declares (``metadata.name``, ``metadata.namespace`` everywhere).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple


class SelectorError(ValueError):
    """An unparsable selector (the API answers 400 BadRequest)."""


@dataclass(frozen=True)
class Requirement:
    key: str
    op: str  # "=", "!=", "in", "notin", "exists", "!"
    values: Tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        if self.op == "exists":
            return present
        if self.op == "!":
            return not present
        if self.op in ("=", "in"):
            return present and labels[self.key] in self.values
        # "!=" and "notin" match when the key is absent too.
        return not present or labels[self.key] not in self.values


Selector = Tuple[Requirement, ...]

_KEY_RE = re.compile(r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                     r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
_VALUE_RE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")


def _split_top_level(text: str) -> List[str]:
    """Split on commas that are not inside parentheses."""
    parts, depth, current = [], 0, []
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth < 0:
                raise SelectorError("unbalanced parentheses in selector %r" % text)
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    if depth:
        raise SelectorError("unbalanced parentheses in selector %r" % text)
    parts.append("".join(current))
    return parts


def _check_key(key: str, text: str) -> str:
    if not _KEY_RE.match(key) or len(key.split("/")[-1]) > 63:
        raise SelectorError("invalid label key %r in selector %r" % (key, text))
    return key


def _check_value(value: str, text: str) -> str:
    if len(value) > 63 or not _VALUE_RE.match(value):
        raise SelectorError("invalid label value %r in selector %r" % (value, text))
    return value


_SET_RE = re.compile(r"^\s*(\S+?)\s+(in|notin)\s*\((.*)\)\s*$")


def parse_label_selector(text: Optional[str]) -> Selector:
    """Parse the string form; an empty or ``None`` selector matches everything."""
    if text is None or not text.strip():
        return ()
    requirements = []
    for raw in _split_top_level(text):
        part = raw.strip()
        if not part:
            raise SelectorError("empty requirement in selector %r" % text)
        match = _SET_RE.match(part)
        if match:
            key, op, inner = match.group(1), match.group(2), match.group(3)
            values = tuple(sorted({_check_value(v.strip(), text) for v in inner.split(",")}))
            if not inner.strip():
                raise SelectorError("for 'in', 'notin' operators, values set can't be empty")
            requirements.append(Requirement(_check_key(key, text), op, values))
            continue
        for token, op in (("!=", "!="), ("==", "="), ("=", "=")):
            if token in part:
                key, value = part.split(token, 1)
                requirements.append(Requirement(_check_key(key.strip(), text), op,
                                                (_check_value(value.strip(), text),)))
                break
        else:
            if part.startswith("!"):
                requirements.append(Requirement(_check_key(part[1:].strip(), text), "!"))
            elif re.search(r"\s", part) or any(c in part for c in "<>()"):
                raise SelectorError("unable to parse requirement %r in selector %r" % (part, text))
            else:
                requirements.append(Requirement(_check_key(part, text), "exists"))
    return tuple(requirements)


def from_label_selector(selector: Optional[Mapping[str, Any]]) -> Selector:
    """Convert a ``metav1.LabelSelector`` dict. ``None`` matches nothing; ``{}`` everything."""
    if selector is None:
        return (Requirement("", "in", ()),)  # never matches (no label has an empty key)
    requirements = []
    for key, value in sorted((selector.get("matchLabels") or {}).items()):
        requirements.append(Requirement(key, "=", (str(value),)))
    for expr in selector.get("matchExpressions") or []:
        op = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!"}.get(
            expr.get("operator"))
        if op is None:
            raise SelectorError("%r is not a valid label selector operator" % expr.get("operator"))
        requirements.append(Requirement(expr.get("key", ""), op,
                                        tuple(str(v) for v in expr.get("values") or ())))
    return tuple(requirements)


def label_selector_errors(selector: Any, path: str) -> List[Tuple[str, str]]:
    """Validation problems of a LabelSelector dict as (field, message) pairs."""
    if selector is None:
        return []
    if not isinstance(selector, dict):
        return [(path, "must be an object")]
    problems = []
    for key, value in (selector.get("matchLabels") or {}).items():
        if not _KEY_RE.match(str(key)):
            problems.append(("%s.matchLabels" % path, "Invalid value: %r: invalid label key" % key))
        if not isinstance(value, str) or not _VALUE_RE.match(value) or len(value) > 63:
            problems.append(("%s.matchLabels" % path,
                             "Invalid value: %r: a valid label must be an empty string or "
                             "consist of alphanumeric characters, '-', '_' or '.'" % (value,)))
    for index, expr in enumerate(selector.get("matchExpressions") or []):
        field = "%s.matchExpressions[%d]" % (path, index)
        op = expr.get("operator")
        values = expr.get("values") or []
        if op in ("In", "NotIn") and not values:
            problems.append((field + ".values", "Required value: must be specified when "
                             "`operator` is 'In' or 'NotIn'"))
        elif op in ("Exists", "DoesNotExist") and values:
            problems.append((field + ".values", "Forbidden: may not be specified when "
                             "`operator` is 'Exists' or 'DoesNotExist'"))
        elif op not in ("In", "NotIn", "Exists", "DoesNotExist"):
            problems.append((field + ".operator", "Unsupported value: %r" % (op,)))
    return problems


def matches(selector: Selector, labels: Optional[Mapping[str, str]]) -> bool:
    labels = labels or {}
    return all(req.matches(labels) for req in selector)


def is_empty(selector: Selector) -> bool:
    return not selector


# ---------------------------------------------------------------- field selectors

FieldSelector = Tuple[Tuple[str, str, str], ...]  # (field, op "="/"!=", value)


def parse_field_selector(text: Optional[str], supported: Iterable[str]) -> FieldSelector:
    if text is None or not text.strip():
        return ()
    allowed = set(supported)
    result = []
    for raw in text.split(","):
        part = raw.strip()
        for token, op in (("!=", "!="), ("==", "="), ("=", "=")):
            if token in part:
                field, value = part.split(token, 1)
                field = field.strip()
                if field not in allowed:
                    raise SelectorError('field label not supported: %s' % field)
                result.append((field, op, value.strip()))
                break
        else:
            raise SelectorError("invalid selector: '%s'; can't understand '%s'" % (text, part))
    return tuple(result)


def field_value(obj: Mapping[str, Any], path: str) -> str:
    node: Any = obj
    for piece in path.split("."):
        if not isinstance(node, dict):
            return ""
        node = node.get(piece)
    if node is None:
        return ""
    if isinstance(node, bool):
        return "true" if node else "false"
    return str(node)


def field_matches(selector: FieldSelector, obj: Mapping[str, Any]) -> bool:
    for field, op, value in selector:
        actual = field_value(obj, field)
        if (actual == value) != (op == "="):
            return False
    return True


def selector_dict_to_string(selector: Dict[str, Any]) -> str:
    """Render a LabelSelector dict in the string syntax (used for status.selector fields)."""
    parts = ["%s=%s" % (k, v) for k, v in sorted((selector.get("matchLabels") or {}).items())]
    for expr in selector.get("matchExpressions") or []:
        op = expr.get("operator")
        if op == "Exists":
            parts.append(expr["key"])
        elif op == "DoesNotExist":
            parts.append("!" + expr["key"])
        else:
            parts.append("%s %s (%s)" % (expr["key"], op.lower(), ",".join(expr.get("values") or [])))
    return ",".join(parts)
