"""A part's wall time from ``scripts/wall_time.sh``'s rows (one per invocation: part, started, ended,
seconds, exit, machine). A part stopped in one session and continued in the next has several rows;
its time is the sum of their seconds, without the gaps between them. The summary is a pure sum of
the rows, so the README's part times are numbers the pipeline wrote, never added by hand.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from marginmine.errors import InputError
from marginmine.io.safe import write_text

COLUMNS = ("part", "started", "ended", "seconds", "exit", "machine")


def read_rows(path: str | Path) -> list[dict[str, str]]:
    """The rows of a wall-times TSV; a missing column or a bad value is an InputError (file, line)."""
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    if not lines or tuple(lines[0].split("\t")) != COLUMNS:
        raise InputError(path, f"not a wall-times table (header {'/'.join(COLUMNS)} expected)", line=1,
                         hint="it is written by scripts/wall_time.sh")
    rows = []
    for n, line in enumerate(lines[1:], start=2):
        cells = line.split("\t")
        if len(cells) != len(COLUMNS):
            raise InputError(path, f"{len(cells)} columns, {len(COLUMNS)} expected", line=n)
        row = dict(zip(COLUMNS, cells))
        if not row["seconds"].isdigit() or not row["exit"].lstrip("-").isdigit():
            raise InputError(path, f"seconds {row['seconds']!r} / exit {row['exit']!r} are not integers", line=n)
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


def part_totals(rows: list[dict[str, str]]) -> list[Part]:
    """Per part, in order of first appearance: its summed seconds, every invocation's exit status,
    the machines it ran on, its first start and last end."""
    parts: dict[str, Part] = {}
    for r in rows:
        p = parts.setdefault(r["part"], Part(r["part"], r["started"]))
        p.seconds += int(r["seconds"])
        p.exits.append(int(r["exit"]))
        if r["machine"] not in p.machines:
            p.machines.append(r["machine"])
        p.last_ended = r["ended"]
    return list(parts.values())


def write_summary(tsv: str | Path, md: str | Path) -> list[Part]:
    """``md``: one row per part of ``tsv``, and the sum over parts."""
    parts = part_totals(read_rows(tsv))
    lines = [f"# Wall time per part: `{tsv}`", "",
             "A part's time is the sum of its invocations' seconds (scripts/wall_time.sh writes a row per "
             "invocation; the gaps between them are not counted). Done: its last invocation exited 0.", "",
             "| part | invocations | seconds | minutes | done | exit statuses | machines | first started | last ended |",
             "|---|---:|---:|---:|---|---|---|---|---|"]
    for p in parts:
        lines.append(f"| {p.part} | {len(p.exits)} | {p.seconds} | {p.seconds / 60:.1f} | {'yes' if p.done else 'no'} | "
                     f"{', '.join(map(str, p.exits))} | {'; '.join(p.machines)} | {p.first_started} | {p.last_ended} |")
    total = sum(p.seconds for p in parts)
    lines += ["", f"All parts: {total} s = {total / 60:.1f} min."]
    write_text(md, "\n".join(lines) + "\n")
    return parts
