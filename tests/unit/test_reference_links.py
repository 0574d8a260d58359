"""Citations of docs/reference/specs.md resolve, and nothing cites notes outside the repository.

The convention: facts are cited as ``docs/reference/specs.md §x.y`` (a relative path to the same
file is fine too). In a file that mentions ``specs.md``, every ``§<number>`` (also the later ones in
a list such as ``§2.9 (...), §6.6`` and both ends of ``§4.3-4.4``) must be a numbered heading of
specs.md. The research notes the page replaced lived outside the repository; citing them is an
error.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SPECS_PAGE = REPO / "docs" / "reference" / "specs.md"
THIS_FILE = Path(__file__).resolve()
SKIP_DIRS = {".git", ".venv", ".build", "node_modules", "__pycache__", ".tox", ".mypy_cache"}
MAX_BYTES = 2_000_000

NUMBER = r"\d+(?:\.\d+)*"
HEADING = re.compile(r"^#{2,6}\s+(%s)\.?\s" % NUMBER)
SECTION_REF = re.compile(r"§\s*(%s)(?:\s*[-–]\s*(%s))?" % (NUMBER, NUMBER))
# Citations of the old notes: "SPECS §4.1", "SPECS 9.2", "[SPECS 3.1 ...", and their path.
OLD_CITATION = re.compile(r"\bSPECS\s+§|\bSPECS\s+\d|shared/reference|SPECS\.md")

# Section numbers of specs.md that code and docs already cite; they must never disappear.
STABLE_SECTIONS = (
    "0", "1", "1.1", "1.2", "1.3",
    "2", "2.1", "2.2", "2.3", "2.4", "2.5", "2.6", "2.7", "2.8", "2.9", "2.10", "2.11",
    "3", "3.1", "3.2",
    "4", "4.1", "4.2", "4.3", "4.4", "4.5", "4.6", "4.7", "4.8", "4.9",
    "5", "6", "6.1", "6.2", "6.3", "6.4", "6.5", "6.6",
    "7", "7.1", "7.2", "7.3", "7.4", "8", "9", "9.1", "9.2", "9.3", "9.4", "9.5", "10", "11",
)


def _headings() -> set[str]:
    numbers = set()
    for line in SPECS_PAGE.read_text(encoding="utf-8").splitlines():
        match = HEADING.match(line)
        if match:
            numbers.add(match.group(1))
    return numbers


def _candidate_paths() -> list[Path]:
    """Files of the checkout: git's view when available (tracked and untracked, not ignored)."""
    try:
        out = subprocess.run(["git", "-C", str(REPO), "ls-files", "-co", "--exclude-standard", "-z"],
                             check=True, capture_output=True).stdout.decode("utf-8")
        return [REPO / name for name in out.split("\0") if name]
    except (OSError, subprocess.CalledProcessError):
        paths = []
        for top, dirs, files in os.walk(REPO):
            dirs[:] = [d for d in dirs if d not in SKIP_DIRS]
            paths.extend(Path(top) / name for name in files)
        return paths


def _text_files() -> list[tuple[str, str]]:
    """(relative path, text) of every readable UTF-8 file except this test."""
    result = []
    for path in _candidate_paths():
        if path.resolve() == THIS_FILE or set(path.relative_to(REPO).parts) & SKIP_DIRS:
            continue
        try:
            if not path.is_file() or path.stat().st_size > MAX_BYTES:
                continue
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        result.append((str(path.relative_to(REPO)), text))
    return result


@pytest.fixture(name="text_files", scope="module")
def text_files_fixture() -> list[tuple[str, str]]:
    return _text_files()


def test_specs_page_keeps_its_section_numbers() -> None:
    missing = [number for number in STABLE_SECTIONS if number not in _headings()]
    assert not missing, "sections missing from docs/reference/specs.md: %s" % missing


def test_every_specs_citation_resolves(text_files: list[tuple[str, str]]) -> None:
    headings = _headings()
    broken = []
    for name, text in text_files:
        if "specs.md" not in text:
            continue
        for number, line in enumerate(text.splitlines(), 1):
            for match in SECTION_REF.finditer(line):
                for cited in (group for group in match.groups() if group):
                    if cited not in headings:
                        broken.append("%s:%d: §%s" % (name, number, cited))
    assert not broken, "citations of sections that docs/reference/specs.md lacks:\n" + "\n".join(broken)


def test_nothing_cites_notes_outside_the_repository(text_files: list[tuple[str, str]]) -> None:
    found = []
    for name, text in text_files:
        for number, line in enumerate(text.splitlines(), 1):
            if OLD_CITATION.search(line):
                found.append("%s:%d: %s" % (name, number, line.strip()[:120]))
    assert not found, ("cite docs/reference/specs.md §x.y instead of the old notes:\n"
                       + "\n".join(found))
