# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Option checks shared by the cluster modules, run before any request: each problem names the option.

Pure. Object names follow the API server's rules (``_k8s.name_problem``); label selectors and
annotation keys follow Kubernetes' syntax (docs/reference/specs.md §12).
"""

from __future__ import annotations

import re
from typing import Any, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._resources import name_problem

_NAME_PART = r"([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9]"
_QUALIFIED = re.compile(r"(?:[a-z0-9]([-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?" + _NAME_PART)
_LABEL_VALUE = re.compile("(%s)?" % _NAME_PART)
_TERM = re.compile(r"\s*(!?)\s*([^\s!=(),]+)\s*(?:(==|!=|=)\s*([^\s(),]*)|\s+(in|notin)\s*\(([^()]*)\))?\s*")


def qualified_name_problem(option: str, key: Any) -> Optional[str]:
    """Why ``key`` is not a label or annotation key (``[prefix/]name``)."""
    if isinstance(key, str) and _QUALIFIED.fullmatch(key) and len(key.split("/")[0]) <= 253:
        return None
    return ("%s: key %r is not a valid label or annotation key ([DNS-1123 subdomain/]name of at most 63 "
            "letters, digits, '-', '_' or '.')" % (option, key))


def selector_problem(option: str, selector: Any) -> Optional[str]:
    """Why ``selector`` is not a label selector (``k=v``, ``k!=v``, ``k in (a,b)``, ``k``, ``!k``, comma-joined)."""
    text = selector if isinstance(selector, str) else ""
    terms = re.split(r",(?![^(]*\))", text) if text.strip() else []
    for term in terms:
        match = _TERM.fullmatch(term)
        if not match or qualified_name_problem(option, match.group(2)):
            return "%s: %r is not a valid label selector (term %r)" % (option, selector, term.strip())
        values = [match.group(4)] if match.group(3) else (match.group(6) or "").split(",") if match.group(5) else []
        if match.group(1) and (match.group(3) or match.group(5)):
            return "%s: %r is not a valid label selector ('!' takes a key alone)" % (option, selector)
        if any(not _LABEL_VALUE.fullmatch(v.strip()) for v in values):
            return "%s: %r is not a valid label selector (bad value in %r)" % (option, selector, term.strip())
    return None


def object_name_problems(names: Sequence[Tuple[str, str, Any]]) -> List[str]:
    """(option, kind, value) -> a problem for each value that cannot name an object of that kind."""
    problems = []
    for option, kind, value in names:
        problem = name_problem(kind, value) if value is not None else None
        if problem:
            problems.append("%s: %s" % (option, problem))
    return problems


def number_problems(params: Mapping[str, Any], at_least: Mapping[str, float], above: Sequence[str] = ()) -> List[str]:
    """Options that must be >= a bound (``at_least``) or > 0 (``above``); unset options are skipped."""
    problems = ["%s must be >= %s, got %s" % (option, bound, params[option])
                for option, bound in sorted(at_least.items()) if params.get(option) is not None and params[option] < bound]
    problems.extend("%s must be > 0, got %s" % (option, params[option])
                    for option in above if params.get(option) is not None and params[option] <= 0)
    return problems
