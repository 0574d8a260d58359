"""Structural-schema validation and pruning of custom resources (apiextensions.k8s.io/v1).

Like the API server, a custom resource whose CRD version carries an ``openAPIV3Schema`` is
pruned (fields the schema does not declare are dropped, unless
``x-kubernetes-preserve-unknown-fields: true`` or ``additionalProperties`` allows them) and then
validated. Supported keywords: type, nullable, enum, required, properties,
additionalProperties, items, minimum/maximum (+exclusive*), minLength/maxLength, pattern,
minItems/maxItems, minProperties/maxProperties, x-kubernetes-int-or-string,
x-kubernetes-preserve-unknown-fields, x-kubernetes-embedded-resource. Not supported (ignored):
allOf/anyOf/oneOf/not, format, CEL ``x-kubernetes-validations``, defaults.
Messages follow the API server's wording (``spec.x: Invalid value: ...``).
"""

from __future__ import annotations

import json
import re
from typing import Any, Dict, List, Optional, Tuple

Problem = Tuple[str, str]

_TYPES = {"object": dict, "array": list, "string": str, "boolean": bool}


def _type_ok(schema: Dict[str, Any], value: Any) -> bool:
    if schema.get("x-kubernetes-int-or-string"):
        return isinstance(value, (int, str)) and not isinstance(value, bool)
    wanted = schema.get("type")
    if not wanted:
        return True
    if wanted == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if wanted == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    expected = _TYPES.get(wanted)
    return expected is None or isinstance(value, expected)


def _show(value: Any) -> str:
    return json.dumps(value) if not isinstance(value, (dict, list)) else \
        ("\"object\"" if isinstance(value, dict) else "\"array\"")


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "null"


def prune_and_validate(schema: Optional[Dict[str, Any]], obj: Dict[str, Any]) -> Tuple[Dict[str, Any], List[Problem]]:
    """Return (pruned copy, problems) for a whole custom resource."""
    if not schema:
        return obj, []
    problems: List[Problem] = []
    result = dict(obj)
    properties = schema.get("properties") or {}
    for key in list(result):
        if key in ("apiVersion", "kind", "metadata"):
            continue
        if key in properties:
            if result[key] is None and not properties[key].get("nullable"):
                del result[key]
            else:
                result[key] = _walk(properties[key], result[key], key, problems)
        elif not schema.get("x-kubernetes-preserve-unknown-fields"):
            del result[key]
    for key in schema.get("required") or []:
        if key not in result and key not in ("apiVersion", "kind", "metadata"):
            problems.append((key, "Required value"))
    return result, problems


def _walk(schema: Dict[str, Any], value: Any, path: str, problems: List[Problem]) -> Any:
    if value is None:
        return None
    if not _type_ok(schema, value):
        problems.append((path, "Invalid value: %s: %s in body must be of type %s: %s"
                         % (_show(value), path, schema.get("type"), json.dumps(_json_type(value)))))
        return value
    if "enum" in schema and value not in schema["enum"]:
        problems.append((path, "Unsupported value: %s: supported values: %s"
                         % (json.dumps(value), ", ".join(json.dumps(v) for v in schema["enum"]))))
    if isinstance(value, dict):
        return _walk_object(schema, value, path, problems)
    if isinstance(value, list):
        items = schema.get("items") or {}
        if "minItems" in schema and len(value) < schema["minItems"]:
            problems.append((path, "Invalid value: %d: %s in body should have at least %d items"
                             % (len(value), path, schema["minItems"])))
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            problems.append((path, "Too many: %d: must have at most %d items" % (len(value), schema["maxItems"])))
        return [_walk(items, item, "%s[%d]" % (path, index), problems) if item is not None else item
                for index, item in enumerate(value)]
    if isinstance(value, str):
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            problems.append((path, "Too long: may not be longer than %d" % schema["maxLength"]))
        if "minLength" in schema and len(value) < schema["minLength"]:
            problems.append((path, "Invalid value: %s: %s in body should be at least %d chars long"
                             % (json.dumps(value), path, schema["minLength"])))
        if "pattern" in schema and not re.search(schema["pattern"], value):
            problems.append((path, "Invalid value: %s: %s in body should match '%s'"
                             % (json.dumps(value), path, schema["pattern"])))
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        for key, exclusive, word, compare in (("minimum", "exclusiveMinimum", "greater", lambda a, b: a < b),
                                              ("maximum", "exclusiveMaximum", "less", lambda a, b: a > b)):
            if key not in schema:
                continue
            limit = schema[key]
            if compare(value, limit) or (schema.get(exclusive) and value == limit):
                relation = "%s than" % word if schema.get(exclusive) else "%s than or equal to" % word
                problems.append((path, "Invalid value: %s: %s in body should be %s %s"
                                 % (json.dumps(value), path, relation, json.dumps(limit))))
    return value


def _walk_object(schema: Dict[str, Any], value: Dict[str, Any], path: str, problems: List[Problem]) -> Dict[str, Any]:
    if schema.get("x-kubernetes-embedded-resource"):
        return value
    properties = schema.get("properties")
    additional = schema.get("additionalProperties")
    preserve = schema.get("x-kubernetes-preserve-unknown-fields")
    if not schema.get("type") and properties is None and additional is None:
        return value  # an untyped node (not structural): left alone
    result: Dict[str, Any] = {}
    for key, item in value.items():
        child = "%s.%s" % (path, key)
        if properties is not None and key in properties:
            child_schema = properties[key]
        elif isinstance(additional, dict):
            child_schema = additional
        elif additional is True or preserve:
            result[key] = item
            continue
        else:
            continue  # not declared: pruned, like the API server
        if item is None:
            if child_schema.get("nullable"):
                result[key] = None
            continue  # nulls of non-nullable fields are dropped
        result[key] = _walk(child_schema, item, child, problems)
    for key in schema.get("required") or []:
        if key not in result:
            problems.append(("%s.%s" % (path, key), "Required value"))
    if "minProperties" in schema and len(result) < schema["minProperties"]:
        problems.append((path, "Invalid value: %d: %s in body should have at least %d properties"
                         % (len(result), path, schema["minProperties"])))
    if "maxProperties" in schema and len(result) > schema["maxProperties"]:
        problems.append((path, "Too many: %d: must have at most %d items" % (len(result), schema["maxProperties"])))
    return result


def json_path_value(obj: Dict[str, Any], json_path: str) -> Any:
    """Value of a simple additionalPrinterColumns jsonPath (``.a.b``, ``.a[0].b``)."""
    node: Any = obj
    for part in re.findall(r"[^.\[\]]+|\[\d+\]", json_path.strip().lstrip(".")):
        if part.startswith("["):
            index = int(part[1:-1])
            node = node[index] if isinstance(node, list) and index < len(node) else None
        else:
            node = node.get(part) if isinstance(node, dict) else None
        if node is None:
            return None
    return node


__all__ = ["prune_and_validate", "json_path_value"]
