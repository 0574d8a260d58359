# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A local chart's files, read from the file system with bounds (issue 43 #2); ``_chart_files`` judges them.

It never blocks, never reads without a bound and never recurses:

* ``chart_ref`` itself is ``stat``-ed first (symlinks followed, which never opens it): a directory is
  walked, a regular file is read as an archive, anything else (a FIFO, a device, a socket) is
  ``NotAChart``, an error naming ``chart_ref``. Helm would open it (``loader.Load`` -> ``LoadFile``,
  helm pkg/chart/loader/load.go) and block on a FIFO or read a device, so it is not left to helm;
* every file is opened with ``O_NONBLOCK`` (and ``O_NOFOLLOW`` inside a directory), checked again
  with ``fstat`` on the open descriptor (regular, size within ``MAX_FILE_SIZE``, or ``MAX_CHART_SIZE``
  for an archive) and read up to that size only;
* a directory is walked with an explicit stack, in helm's lexical order, at most ``MAX_DEPTH``
  levels and ``MAX_ENTRIES`` entries, at most ``MAX_CHART_SIZE`` bytes in all.

Whatever else the reader meets - a symlink, a file that is not regular inside the chart (helm's
``LoadDir`` refuses "irregular" files itself, pkg/chart/loader/directory.go), a bound passed - is
``Unsupported``: helm reads the chart instead, as before.
"""

from __future__ import annotations

import os
import stat
from typing import List, Tuple

from ansible_collections.gpufleet.sharing.plugins.module_utils.operator._chart_files import (
    MAX_CHART_SIZE, MAX_FILE_SIZE, ChartFile, Unsupported, archive_files, ignore_rules, ignored, strip_bom)

MAX_DEPTH = 64  # directory levels below the chart's top; deeper is left to helm
MAX_ENTRIES = 10000  # files and directories in all; more is left to helm


class NotAChart(Exception):
    """``chart_ref`` is neither a directory nor a regular file: nothing reads it (helm would block)."""


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def read_bounded(path: str, limit: int, follow: bool = True) -> bytes:
    """A regular file's bytes, at most ``limit`` of them; ``Unsupported`` for anything else. Never blocks:
    ``O_NONBLOCK`` on the open, and the descriptor's own ``fstat`` decides before any read."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    if not follow:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        descriptor = os.open(path, flags)
    except OSError as exc:
        raise Unsupported("%s cannot be opened: %s" % (path, exc.strerror or exc)) from exc
    try:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode):
            raise Unsupported("%s is %s" % (path, _kind(info.st_mode)))
        if info.st_size > limit:
            raise Unsupported("%s is larger than helm loads (%d bytes, at most %d)" % (path, info.st_size, limit))
        chunks, size = [], 0
        while True:
            chunk = os.read(descriptor, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:
                raise Unsupported("%s grew past %d bytes while read" % (path, limit))
        return b"".join(chunks)
    finally:
        os.close(descriptor)


def check_chart_ref(path: str) -> os.stat_result:
    """``path``'s stat (symlinks followed; ``stat`` never opens it, so it cannot block); ``NotAChart``
    when it is neither a directory nor a regular file."""
    info = os.stat(path)
    if not (stat.S_ISDIR(info.st_mode) or stat.S_ISREG(info.st_mode)):
        raise NotAChart("chart_ref %s is %s, not a chart directory or a chart archive (.tgz)"
                        % (path, _kind(info.st_mode)))
    return info


def read_chart_files(path: str) -> List[ChartFile]:
    """The files helm loads from a local chart: a directory (walked in lexical order, without what its
    .helmignore leaves out) or an archive. ``NotAChart`` for a FIFO, a device or a socket;
    ``Unsupported`` for what is left to helm."""
    info = check_chart_ref(path)
    if os.path.islink(path):
        raise Unsupported("%s is a symlink" % path)
    if stat.S_ISREG(info.st_mode):
        return archive_files(read_bounded(path, MAX_CHART_SIZE, follow=False))
    return _walk(path)


def _helmignore(path: str) -> str:
    ignore_file = os.path.join(path, ".helmignore")
    if not os.path.lexists(ignore_file):
        return ""
    try:
        return read_bounded(ignore_file, MAX_FILE_SIZE, follow=False).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Unsupported(".helmignore is not UTF-8") from exc


def _walk(path: str) -> List[ChartFile]:
    """Depth first in lexical order, as helm's walk, with an explicit stack: (relative dir, entries left)."""
    rules = ignore_rules(_helmignore(path))
    files: List[ChartFile] = []
    entries, total = 0, 0
    stack: List[Tuple[str, List[os.DirEntry]]] = [("", _listing(path))]
    while stack:
        relative, left = stack[-1]
        if not left:
            stack.pop()
            continue
        entry = left.pop()
        entries += 1
        if entries > MAX_ENTRIES:
            raise Unsupported("the chart has more than %d entries" % MAX_ENTRIES)
        name = relative + "/" + entry.name if relative else entry.name
        if entry.is_symlink():
            raise Unsupported("%s is a symlink" % name)
        if entry.is_dir(follow_symlinks=False):
            if not ignored(rules, name, True):
                if len(stack) >= MAX_DEPTH:
                    raise Unsupported("%s is more than %d directories deep" % (name, MAX_DEPTH))
                stack.append((name, _listing(entry.path)))
            continue
        if ignored(rules, name, False):
            continue
        data = read_bounded(entry.path, MAX_FILE_SIZE, follow=False)
        total += len(data)
        if total > MAX_CHART_SIZE:
            raise Unsupported("the chart is larger than helm loads (over %d bytes)" % MAX_CHART_SIZE)
        files.append(ChartFile(name, strip_bom(data)))
    return files


def _listing(directory: str) -> List[os.DirEntry]:
    """A directory's entries, last name first (the walk pops from the end); at most ``MAX_ENTRIES`` read."""
    found: List[os.DirEntry] = []
    with os.scandir(directory) as scan:
        for entry in scan:
            found.append(entry)
            if len(found) > MAX_ENTRIES:
                raise Unsupported("the chart has more than %d entries" % MAX_ENTRIES)
    return sorted(found, key=lambda item: item.name, reverse=True)


__all__ = ["MAX_DEPTH", "MAX_ENTRIES", "NotAChart", "check_chart_ref", "read_bounded", "read_chart_files"]
