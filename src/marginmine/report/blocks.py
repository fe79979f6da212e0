"""Rendered blocks in hand-written pages, and the stamp parts of a rendered table.

A page (README.md, a docs page) marks where a rendered text goes; ``marginmine docs-results``
replaces what lies between the two markers and leaves every other byte of the page as it was::

    <!-- rendered: key-result begin -->
    (replaced on every render)
    <!-- rendered: key-result end -->

Each marker is a line of its own. The stamp of a rendered table names the file's modification time
(UTC) and the repository's commit at render time (``+dirty`` when a tracked file differs from it; the
pages the render itself writes do not count).
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from pathlib import Path

from marginmine.errors import InputError

MARKER = re.compile(r"<!-- rendered: (?P<name>[A-Za-z0-9][A-Za-z0-9_.-]*) (?P<end>begin|end) -->")


def marker(name: str, end: str = "begin") -> str:
    """The marker line (without its newline) of block ``name``: ``end`` is ``begin`` or ``end``."""
    return f"<!-- rendered: {name} {end} -->"


def find_blocks(text: str, path: str | Path) -> list[tuple[str, int, int]]:
    """(name, begin line, end line) of every block, 0-based line numbers of the markers. A marker
    not alone on its line, a begin without its end, an end without its begin, a block inside another
    or a name used twice is an InputError naming the page and line."""
    blocks: list[tuple[str, int, int]] = []
    open_: tuple[str, int] | None = None
    hint = f"mark a block with a line {marker('NAME')} and a line {marker('NAME', 'end')}"
    for i, line in enumerate(text.splitlines()):
        m = MARKER.search(line)
        if m is None:
            continue
        name, end = m.group("name"), m.group("end")
        if line.strip() != m.group(0):
            raise InputError(str(path), f"the marker {m.group(0)} is not alone on its line", line=i + 1, hint=hint)
        if end == "begin":
            if open_ is not None:
                raise InputError(str(path), f"block {name!r} begins inside block {open_[0]!r}", line=i + 1, hint=hint)
            if any(b[0] == name for b in blocks):
                raise InputError(str(path), f"block {name!r} is marked twice", line=i + 1, hint=hint)
            open_ = (name, i)
        else:
            if open_ is None or open_[0] != name:
                raise InputError(str(path), f"block {name!r} ends without its begin marker", line=i + 1, hint=hint)
            blocks.append((name, open_[1], i))
            open_ = None
    if open_ is not None:
        raise InputError(str(path), f"block {open_[0]!r} has no end marker {marker(open_[0], 'end')}",
                         line=open_[1] + 1, hint=hint)
    return blocks


def replace_blocks(text: str, rendered: Mapping[str, str], path: str | Path,
                   required: Iterable[str] = ()) -> str:
    """``text`` with the content of each marked block replaced by ``rendered[name]`` (a blank line on
    either side, so a Markdown table after the marker renders); the markers and every line outside
    the blocks are kept byte for byte. A page without any block, without a ``required`` one, or with
    a block whose name is not rendered is an InputError naming the page."""
    blocks = find_blocks(text, path)
    names = [b[0] for b in blocks]
    missing = [n for n in required if n not in names]
    if missing:
        raise InputError(str(path), "has no block " + ", ".join(f"{marker(n)} ... {marker(n, 'end')}" for n in missing),
                         hint="place the two marker lines where the rendered text goes")
    if not blocks:
        raise InputError(str(path), f"has no rendered block ({marker('NAME')} ... {marker('NAME', 'end')})",
                         hint="place the markers, or do not pass this page")
    for name, begin, _ in blocks:
        if name not in rendered:
            raise InputError(str(path), f"block {name!r} is not one marginmine docs-results renders (it renders "
                             f"{', '.join(sorted(rendered))})", line=begin + 1)
    lines = text.splitlines(keepends=True)
    newline = "\r\n" if lines and lines[0].endswith("\r\n") else "\n"
    out: list[str] = []
    last = 0
    for name, begin, end in blocks:
        out += lines[last:begin + 1]
        if not out[-1].endswith(("\n", "\r")):  # cannot happen (an end marker follows), kept for safety
            out[-1] += newline
        body = rendered[name].strip("\n")
        out.append(newline + newline.join(body.split("\n")) + newline + newline)
        last = end
    out += lines[last:]
    return "".join(out)


def written_utc(path: str | Path) -> datetime:
    """The file's modification time in UTC (seconds dropped)."""
    return datetime.fromtimestamp(Path(path).stat().st_mtime, tz=timezone.utc).replace(second=0, microsecond=0)


def utc_text(when: datetime) -> str:
    return when.strftime("%Y-%m-%d %H:%M UTC")


def _git(repo: Path, *args: str) -> str | None:
    try:
        r = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    return r.stdout if r.returncode == 0 else None


def commit_stamp(repo: str | Path = ".", ignore: Iterable[str | Path] = ()) -> str:
    """``<short hash>``, with ``+dirty`` when ``git status`` lists a tracked file that differs from the
    commit (the files in ``ignore``, the pages this render writes, are not counted); ``not recorded
    (...)`` outside a git repository."""
    repo = Path(repo)
    head = _git(repo, "rev-parse", "--short", "HEAD")
    top = _git(repo, "rev-parse", "--show-toplevel")
    status = _git(repo, "status", "--porcelain", "--untracked-files=no")
    if not head or not top or status is None:
        return "not recorded (not a git repository with a commit)"
    root = Path(top.strip())
    skip = {Path(p).resolve() for p in ignore}
    changed = []
    for line in status.splitlines():
        for name in line[3:].split(" -> "):
            name = name.strip().strip('"')
            if name and (root / name).resolve() not in skip:
                changed.append(name)
    return head.strip() + ("+dirty" if changed else "")
