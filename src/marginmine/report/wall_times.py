"""A part's wall time from ``scripts/wall_time.sh``'s rows (one per invocation: part, started, ended,
seconds, exit, machine). A part stopped in one session and continued in the next has several rows;
its time is the sum of their seconds, without the gaps between them. The summary is a pure sum of
the rows, so the README's part times are numbers the pipeline wrote, never added by hand. A part
whose rows name more than one machine is marked: its sum mixes CPU models and is not one timing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from marginmine.errors import InputError
from marginmine.io.safe import write_text

COLUMNS = ("part", "started", "ended", "seconds", "exit", "machine")
_HINT = "it is written by scripts/wall_time.sh, one row per invocation"


def _integer(path: str | Path, line: int, name: str, value: str, minimum: int | None = None) -> int:
    try:
        number = int(value)
    except ValueError:
        raise InputError(path, f"{name} {value!r} is not an integer", line=line, hint=_HINT) from None
    if minimum is not None and number < minimum:
        raise InputError(path, f"{name} {number} is below {minimum}", line=line, hint=_HINT)
    return number


def read_rows(path: str | Path) -> list[dict[str, str]]:
    """The rows of a wall-times TSV; an unreadable file, a missing column or a bad value is an
    InputError naming the file (and line)."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise InputError(path, f"cannot be read ({exc.strerror or exc})", hint=_HINT) from exc
    except UnicodeDecodeError as exc:
        raise InputError(path, f"is not UTF-8 text ({exc.reason})", hint=_HINT) from exc
    if not lines:
        raise InputError(path, "is empty (no header)", hint=_HINT)
    if tuple(lines[0].split("\t")) != COLUMNS:
        raise InputError(path, f"not a wall-times table (header {'/'.join(COLUMNS)} expected)", line=1, hint=_HINT)
    rows = []
    for n, line in enumerate(lines[1:], start=2):
        cells = line.split("\t")
        if len(cells) != len(COLUMNS):
            raise InputError(path, f"{len(cells)} columns, {len(COLUMNS)} expected", line=n, hint=_HINT)
        row = dict(zip(COLUMNS, cells))
        _integer(path, n, "seconds", row["seconds"], minimum=0)
        _integer(path, n, "exit", row["exit"])
        rows.append(row)
    return rows


@dataclass
class Part:
    """One part's invocations, in the order they ran."""

    part: str
    first_started: str
    last_ended: str = ""
    seconds: int = 0
    exits: list[int] = field(default_factory=list)
    machines: list[str] = field(default_factory=list)

    @property
    def done(self) -> bool:
        """Its last invocation exited 0."""
        return bool(self.exits) and self.exits[-1] == 0

    @property
    def one_machine(self) -> bool:
        """Every invocation ran on the same machine: the sum is one machine's timing."""
        return len(self.machines) == 1


def part_totals(rows: list[dict[str, str]]) -> list[Part]:
    """Per part, in order of first appearance: its summed seconds, every invocation's exit status,
    the machines it ran on, its earliest start and latest end (ISO times in UTC sort as text)."""
    parts: dict[str, Part] = {}
    for r in rows:
        p = parts.setdefault(r["part"], Part(r["part"], r["started"]))
        p.seconds += int(r["seconds"])
        p.exits.append(int(r["exit"]))
        if r["machine"] not in p.machines:
            p.machines.append(r["machine"])
        p.first_started = min(p.first_started, r["started"])
        p.last_ended = max(p.last_ended, r["ended"])
    return list(parts.values())


def write_summary(tsv: str | Path, md: str | Path) -> list[Part]:
    """``md``: one row per part of ``tsv``, and the sum over parts."""
    parts = part_totals(read_rows(tsv))
    lines = [f"# Wall time per part: `{tsv}`", "",
             "A part's time is the sum of its invocations' seconds (scripts/wall_time.sh writes a row per "
             "invocation; the gaps between them are not counted). Done: its last invocation exited 0. "
             "A part run on several machines is marked: its sum mixes CPU models.", "",
             "| part | invocations | seconds | minutes | done | exit statuses | machines | "
             "first started | last ended |",
             "|---|---:|---:|---:|---|---|---|---|---|"]
    for p in parts:
        machines = "; ".join(p.machines) if p.one_machine else "**mixed:** " + "; ".join(p.machines)
        lines.append(f"| {p.part} | {len(p.exits)} | {p.seconds} | {p.seconds / 60:.1f} | "
                     f"{'yes' if p.done else 'no'} | {', '.join(map(str, p.exits))} | {machines} | "
                     f"{p.first_started} | {p.last_ended} |")
    if not parts:
        lines.append("| (no rows) | 0 | 0 | 0.0 | no |  |  |  |  |")
    total = sum(p.seconds for p in parts)
    lines += ["", f"All parts: {total} s = {total / 60:.1f} min."]
    write_text(md, "\n".join(lines) + "\n")
    return parts
