"""The preprocessing ledger: every input pair is either kept or removed by exactly one step for
one reason, and the ledger shows it per step and per source-length bucket.

``pairs_in == kept + sum(removed)`` holds for the whole corpus and for every bucket; ledgers of
shards merge by addition.
"""

from __future__ import annotations

import json
from bisect import bisect_right
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

#: source-length buckets, in whitespace-separated words of the source side
BUCKET_EDGES = (0, 3, 6, 11, 21, 41, 81)
BUCKETS = tuple(
    f"{lo}-{hi - 1}" if hi else f"{lo}+"
    for lo, hi in zip(BUCKET_EDGES, BUCKET_EDGES[1:] + (None,))  # type: ignore[operator]
)


def length_bucket(src: str) -> str:
    """Bucket label of a source sentence by its whitespace word count."""
    return BUCKETS[bisect_right(BUCKET_EDGES, len(src.split())) - 1]


@dataclass
class Ledger:
    """Counts of pairs in, kept, and removed by (step, reason, bucket)."""

    steps: list[str] = field(default_factory=list)
    pairs_in: Counter[str] = field(default_factory=Counter)
    kept: Counter[str] = field(default_factory=Counter)
    removed: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    notes: Counter[str] = field(default_factory=Counter)

    def declare(self, steps: Iterable[str]) -> None:
        """Register step names in pipeline order (so steps that removed nothing still show)."""
        for s in steps:
            if s not in self.steps:
                self.steps.append(s)

    def add_kept(self, bucket: str) -> None:
        self.pairs_in[bucket] += 1
        self.kept[bucket] += 1

    def add_removed(self, step: str, reason: str, bucket: str) -> None:
        if step not in self.steps:
            self.steps.append(step)
        self.pairs_in[bucket] += 1
        self.removed[(step, reason, bucket)] += 1

    def merge(self, other: "Ledger") -> "Ledger":
        self.declare(other.steps)
        self.pairs_in.update(other.pairs_in)
        self.kept.update(other.kept)
        self.removed.update(other.removed)
        self.notes.update(other.notes)
        return self

    def then(self, later: "Ledger") -> "Ledger":
        """Chain a later stage whose input is exactly this stage's kept pairs (e.g. the sum of
        per-shard ledgers after a split); raises if a single pair went missing in between."""
        if +later.pairs_in != +self.kept:
            raise AssertionError(f"later stage saw {later.total_in} pairs, this stage kept {self.total_kept} "
                                 f"(per bucket: {dict(later.pairs_in)} vs {dict(self.kept)})")
        out = Ledger(steps=list(self.steps), pairs_in=Counter(self.pairs_in), kept=Counter(later.kept),
                     removed=self.removed + later.removed, notes=self.notes + later.notes)
        out.declare(later.steps)
        return out

    @property
    def total_in(self) -> int:
        return sum(self.pairs_in.values())

    @property
    def total_kept(self) -> int:
        return sum(self.kept.values())

    def check(self) -> None:
        """Raise if any pair is unaccounted for."""
        removed = sum(self.removed.values())
        if self.total_in != self.total_kept + removed:
            raise AssertionError(f"ledger does not add up: in={self.total_in} kept={self.total_kept} "
                                 f"removed={removed}")

    def step_table(self) -> list[dict[str, Any]]:
        """One row per step: pairs in, removed (by reason), kept; in of step k+1 = kept of step k."""
        rows, remaining = [], self.total_in
        for step in self.steps:
            reasons: Counter[str] = Counter()
            for (s, reason, _), n in self.removed.items():
                if s == step:
                    reasons[reason] += n
            gone = sum(reasons.values())
            rows.append({"step": step, "in": remaining, "removed": gone, "kept": remaining - gone,
                         "reasons": dict(sorted(reasons.items()))})
            remaining -= gone
        return rows

    def bucket_table(self) -> list[dict[str, Any]]:
        """One row per source-length bucket: in, kept, kept share, removed per step/reason."""
        rows = []
        for b in BUCKETS:
            if not self.pairs_in[b]:
                continue
            removed = {f"{s}/{r}": n for (s, r, bb), n in sorted(self.removed.items()) if bb == b}
            rows.append({"bucket": b, "in": self.pairs_in[b], "kept": self.kept[b],
                         "kept_share": round(self.kept[b] / self.pairs_in[b], 4), "removed": removed})
        return rows

    def to_dict(self) -> dict[str, Any]:
        self.check()
        return {"pairs_in": self.total_in, "kept": self.total_kept,
                "removed": self.total_in - self.total_kept, "steps": self.step_table(),
                "by_source_length": self.bucket_table(), "notes": dict(sorted(self.notes.items())),
                "raw": {"steps": self.steps, "pairs_in": dict(self.pairs_in), "kept": dict(self.kept),
                        "removed": [[s, r, b, n] for (s, r, b), n in sorted(self.removed.items())]}}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Ledger":
        raw = d["raw"]
        led = cls(steps=list(raw["steps"]), pairs_in=Counter(raw["pairs_in"]), kept=Counter(raw["kept"]),
                  notes=Counter(d.get("notes", {})))
        for s, r, b, n in raw["removed"]:
            led.removed[(s, r, b)] += n
        return led

    def tsv_rows(self) -> list[tuple[str, str, str, int]]:
        """Long format: (step, reason, bucket, count); reason ``in``/``kept`` rows give totals."""
        rows: list[tuple[str, str, str, int]] = []
        for r in self.step_table():
            rows.append((r["step"], "in", "all", r["in"]))
            rows.extend((r["step"], reason, "all", n) for reason, n in r["reasons"].items())
            rows.append((r["step"], "kept", "all", r["kept"]))
        order = {b: i for i, b in enumerate(BUCKETS)}
        step_order = {s: i for i, s in enumerate(self.steps)}
        for (s, reason, b), n in sorted(self.removed.items(),
                                        key=lambda kv: (step_order.get(kv[0][0], 99), kv[0][1], order[kv[0][2]])):
            rows.append((s, reason, b, n))
        for b in BUCKETS:
            if self.pairs_in[b]:
                rows.append(("total", "in", b, self.pairs_in[b]))
                rows.append(("total", "kept", b, self.kept[b]))
        rows.extend(("note", k, "all", n) for k, n in sorted(self.notes.items()))
        return rows

    @staticmethod
    def tsv_path(json_path: str | Path) -> Path:
        """The TSV written beside a ledger JSON (same stem, ``.tsv``)."""
        return Path(json_path).with_suffix(".tsv")

    def write(self, json_path: str | Path, tsv_path: str | Path | None = None) -> None:
        """Write the ledger as JSON and the TSV beside it (:meth:`tsv_path` by default), each atomically.

        Refuses a JSON path whose TSV is the JSON itself (a ``.tsv`` name), before writing anything."""
        from marginmine.io.safe import Role, check_paths, write_text

        jp = Path(json_path)
        tp = Path(tsv_path) if tsv_path else self.tsv_path(jp)
        check_paths([], [Role("ledger", jp), Role("ledger TSV", tp)])
        rows = "".join("\t".join(map(str, row)) + "\n" for row in self.tsv_rows())
        write_text(tp, "step\treason\tbucket\tcount\n" + rows)
        write_text(jp, json.dumps(self.to_dict(), indent=1) + "\n")

    @classmethod
    def read(cls, json_path: str | Path) -> "Ledger":
        from marginmine.io.safe import read_json

        return cls.from_dict(read_json(json_path, "a ledger", hint="rerun the preprocessing step that writes it"))

    def summary(self) -> str:
        """A few human-readable lines for logs."""
        lines = [f"{self.total_in} pairs in, {self.total_kept} kept "
                 f"({100 * self.total_kept / max(1, self.total_in):.1f}%)"]
        for r in self.step_table():
            if r["removed"]:
                why = ", ".join(f"{k} {v}" for k, v in r["reasons"].items())
                lines.append(f"  {r['step']}: -{r['removed']} ({why})")
        if self.notes:
            lines.append("  repaired: " + ", ".join(f"{k} {v}" for k, v in sorted(self.notes.items())))
        return "\n".join(lines)
