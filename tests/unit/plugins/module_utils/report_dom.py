"""Reading the HTML fleet report back (html.parser) and comparing every figure it shows with the
report data (the JSON's dict): shared by the unit test and the browser test (issue 24)."""

from __future__ import annotations

from html.parser import HTMLParser
from typing import Any, Dict, List, Mapping, Optional, Tuple

VOID = {"meta", "link", "br", "img", "input", "hr", "line", "rect", "path", "circle"}


class Element:
    def __init__(self, tag: str, attrs: Dict[str, str], parent: Optional["Element"]) -> None:
        self.tag, self.attrs, self.parent = tag, attrs, parent
        self.children: List["Element"] = []
        self.parts: List[str] = []

    def text(self) -> str:
        return "".join(self.parts) + "".join(c.text() for c in self.children)

    def walk(self):
        yield self
        for child in self.children:
            yield from child.walk()


class Tree(HTMLParser):
    """A minimal DOM: every element with its attributes and text (children's text included)."""

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Element("#root", {}, None)
        self.current = self.root
        self.feed(html)
        self.close()

    def handle_starttag(self, tag, attrs):
        element = Element(tag, dict((k, v or "") for k, v in attrs), self.current)
        self.current.children.append(element)
        if tag not in VOID:
            self.current = element

    def handle_startendtag(self, tag, attrs):
        self.current.children.append(Element(tag, dict((k, v or "") for k, v in attrs), self.current))

    def handle_endtag(self, tag):
        node = self.current
        while node is not None and node.tag != tag:
            node = node.parent
        if node is not None and node.parent is not None:
            self.current = node.parent

    def handle_data(self, data):
        self.current.parts.append(data)

    def all(self, attr: Optional[str] = None, tag: Optional[str] = None) -> List[Element]:
        return [e for e in self.root.walk() if (attr is None or attr in e.attrs) and (tag is None or e.tag == tag)]


def resolve(data: Any, pointer: str) -> Any:
    """RFC 6901."""
    for raw in pointer.split("/")[1:]:
        part = raw.replace("~1", "/").replace("~0", "~")
        data = data[int(part)] if isinstance(data, list) else data[part]
    return data


def same(shown: str, value: Any) -> bool:
    """The text shown is the value (numbers to the four significant digits the page shows)."""
    shown = shown.strip()
    if isinstance(value, bool):
        return shown == str(value).lower()
    if isinstance(value, (int, float)):
        try:
            number = float(shown.split()[0] if shown else "")
        except ValueError:
            return False
        return abs(number - value) <= 5e-4 * abs(value) + 1e-12
    return shown == ("-" if value is None else str(value))


def _int(value: Any) -> int:
    try:
        return int(str(value))
    except (TypeError, ValueError):
        return 0


def fleet_figures(data: Mapping[str, Any]) -> Dict[str, Any]:
    """The fleet sums recomputed from the data on their own (not with the renderer's code)."""
    figures: Dict[str, Any] = {"gpus": sum(len(g) for g in (data.get("gpus") or {}).values()),
                               "failed_nodes": len((data.get("summary") or {}).get("failed_nodes") or [])}
    capacity = {(c["node"], c["name"]): c["actual"] for c in data.get("checks") or [] if c["kind"] == "capacity"}
    for node in data.get("nodes") or []:
        resources, labels = node["resources"], node["labels"]
        for name in [r for r in resources if not r.endswith(".shared")]:
            planned = resources.get(name + ".shared") or resources[name]
            advertised_as = name + ".shared" if resources.get(name + ".shared") else name
            for key, add in (("nodes", 1), ("before", _int(labels.get(name + ".count", planned))), ("after", planned),
                             ("advertised", _int(capacity.get((node["node"], advertised_as))))):
                figures["fleet/%s/%s" % (name, key)] = figures.get("fleet/%s/%s" % (name, key), 0) + add
    rollout = data.get("rollout") or {}
    figures["batches"] = len({r["batch"] for r in rollout.get("nodes") or [] if r.get("batch") is not None})
    figures["cordoned"] = sum(1 for r in rollout.get("nodes") or []
                              if r["outcome"] in ("failed", "unreachable") or "left cordoned" in (r.get("reason") or ""))
    for index, row in enumerate(data.get("probe") or []):
        replicas = max(1, row["replicas"] or 1)
        figures["fair/probe/%d" % index] = (row.get("baseline_tflops") or row["exclusive_tflops"]) / replicas
        figures["memfair/probe/%d" % index] = row["memory_total_mib"] / replicas
    return figures


def disagreements(html: str, data: Mapping[str, Any]) -> Tuple[List[str], List[str]]:
    """(every figure of the page that differs from the data, the pointers the page shows)."""
    tree, problems, shown = Tree(html), [], []
    for element in tree.all("data-src"):
        pointer = element.attrs["data-src"]
        shown.append(pointer)
        try:
            value = resolve(data, pointer)
        except (KeyError, IndexError, ValueError, TypeError):
            problems.append("%s: not in the data" % pointer)
            continue
        if not same(element.text(), value):
            problems.append("%s: the page shows %r, the data holds %r" % (pointer, element.text().strip(), value))
    figures = fleet_figures(data)
    for element in tree.all("data-fig"):
        name = element.attrs["data-fig"]
        if name not in figures:
            problems.append("figure %s: not computable from the data" % name)
        elif not same(element.text().split()[0] if element.text().split() else "", figures[name]):
            problems.append("figure %s: the page shows %r, the data gives %r" % (name, element.text().strip(), figures[name]))
    return problems, shown
