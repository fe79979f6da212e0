"""One row per system of a suite of scorers (the published scorers' suite, ``published``): what each
scorer's tables say about it, side by side. A pure join of files the pipeline wrote - the intrinsic
table of its encoder, the BUCC-style mining table, the filtering-quality table, its selections'
reports and the BLEU comparison - so no number in the summary is computed anywhere else.

Rows: every scorer, and every trained method that is not a scorer (``random``, ``unfiltered``), once
per selection size N. A value a table does not hold for a row (an encoder that was not evaluated, a
scorer that cannot mine, a system not trained) is left empty, never guessed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

from marginmine.errors import InputError
from marginmine.io.safe import write_text
from marginmine.io.text import open_text_out
from marginmine.timecap import caps_lines

PARACRAWL_PREFIX = "paracrawl"
DEMO_DATA = "demo corpus (preprocessed)"


def read_table(path: str | Path, required: Sequence[str]) -> list[dict[str, str]]:
    """A TSV with a header as dicts; a missing column is an InputError naming the file."""
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    if not lines:
        raise InputError(path, "empty table (no header)", hint="rebuild it with the workflow")
    head = lines[0].split("\t")
    missing = [c for c in required if c not in head]
    if missing:
        raise InputError(path, f"no column {', '.join(missing)} in its header", line=1,
                         hint="a table from an older marginmine: rebuild it with the workflow")
    return [dict(zip(head, line.split("\t"))) for line in lines[1:] if line]


def _num(text: str | None) -> float | None:
    return float(text) if text not in (None, "") else None


def intrinsic_margin(kind: str) -> str | None:
    """The intrinsic table's margin a score kind is judged by: the margin function it mines with
    (``absolute`` is the table's ``cosine``); none for a kind that cannot mine or is not registered."""
    from marginmine.scoring import KINDS

    mines = getattr(KINDS.get(kind), "mines", None)
    return "cosine" if mines == "absolute" else mines


def summary_rows(scorers: Mapping[str, Mapping[str, object]], methods: Sequence[str], sizes: Sequence[str],
                 intrinsic: Sequence[Mapping[str, str]], bucc: Sequence[Mapping[str, str]],
                 quality: Sequence[Mapping[str, str]], comparison: Sequence[Mapping[str, str]],
                 selected: Mapping[tuple[str, str], int]) -> tuple[list[str], list[dict[str, object]]]:
    """(fields, rows): one row per (system, N) for the scorers, then the methods that are not scorers."""
    sets = list(dict.fromkeys(r["set"] for r in intrinsic))
    err = {(r["encoder"], r["set"], r["margin"]): float(r["err_avg"]) for r in intrinsic}
    f1: dict[str, tuple[float, str]] = {}
    for r in bucc:  # the best retrieval of each scorer (thresholds from train, F1 on test)
        value = float(r["f1"])
        if r["scorer"] not in f1 or value > f1[r["scorer"]][0]:
            f1[r["scorer"]] = (value, r["retrieval"])
    auc = {(r["scorer"], "paracrawl" if r["data"].startswith(PARACRAWL_PREFIX) else "demo"): float(r["auc"])
           for r in quality if r["data"].startswith(PARACRAWL_PREFIX) or r["data"] == DEMO_DATA}
    bleu = {(r["method"], r["N"]): r for r in comparison if r["test_set"] == "test"}
    fields = ["system", "kind", "encoder", "N", "pairs", "paracrawl_auc", "demo_auc", "bucc_f1", "bucc_retrieval",
              *[f"err_{s}" for s in sets], "test_bleu", "bleu_sd", "seeds", "p_value", "test_chrf", "chrf_sd",
              "chrf_p"]
    rows: list[dict[str, object]] = []
    names = list(scorers) + [m for m in methods if m not in scorers]
    for name in names:
        s = scorers.get(name, {})
        enc, kind = s.get("encoder"), s.get("kind")
        margin = intrinsic_margin(str(kind))
        for n in sizes:
            b = bleu.get((name, n), {})
            row: dict[str, object] = {
                "system": name, "kind": kind or name, "encoder": enc, "N": n, "pairs": selected.get((name, n)),
                "paracrawl_auc": auc.get((name, "paracrawl")), "demo_auc": auc.get((name, "demo")),
                "bucc_f1": 100 * f1[name][0] if name in f1 else None,
                "bucc_retrieval": f1[name][1] if name in f1 else None,
                "test_bleu": _num(b.get("bleu_mean")), "bleu_sd": _num(b.get("bleu_sd")),
                "seeds": b.get("seeds") or None, "p_value": _num(b.get("p_value")),
                "test_chrf": _num(b.get("chrf_mean")), "chrf_sd": _num(b.get("chrf_sd")),
                "chrf_p": _num(b.get("chrf_p")),
            }
            for st in sets:
                row[f"err_{st}"] = err.get((str(enc), st, margin)) if enc else None
            rows.append(row)
    return fields, rows


P_FIELDS = ("p_value", "chrf_p")


def _fmt(field: str, v: object) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.3f}" if field.endswith("auc") else (f"{v:.4f}" if field in P_FIELDS else f"{v:.1f}" if
                                                          not field.startswith("err_") else f"{v:.2f}")
    return str(v)


def write_summary(fields: Sequence[str], rows: Sequence[Mapping[str, object]], tsv: str | Path, md: str | Path,
                  title: str, sources: Sequence[str], machines: str | None = None, caps: Sequence[str] = ()) -> None:
    """The TSV and the Markdown table; ``machines``: the line saying where the NMT systems ran; ``caps``:
    time-cap warnings of the models the rows are built on (:mod:`marginmine.timecap`)."""
    with open_text_out(tsv) as fh:
        fh.write("\t".join(fields) + "\n")
        for r in rows:
            fh.write("\t".join(_fmt(f, r.get(f)) for f in fields) + "\n")
    lines = [f"# {title}", "",
             "One row per system and N. AUC: ROC-AUC on the ParaCrawl human labels and on the demo corpus' "
             "own labels; BUCC F1: test split, thresholds from train, the scorer's best retrieval; err_*: the "
             "scorer's encoder's intrinsic error (%, mean of both directions) under the scorer's margin; "
             "test BLEU and chrF: mean (sd) over training seeds, p against the comparison's reference (p_value "
             "BLEU's, chrf_p chrF's). Empty: the "
             "table holds no value for it.", "",
             "| " + " | ".join(fields) + " |", "|" + "---|" * len(fields)]
    lines += ["| " + " | ".join(_fmt(f, r.get(f)) for f in fields) + " |" for r in rows]
    lines += [*(["", machines] if machines else []), *caps_lines(caps), "",
              "Joined from: " + ", ".join(f"`{s}`" for s in sources)]
    write_text(md, "\n".join(lines) + "\n")


def selected_counts(paths: Sequence[str | Path]) -> dict[tuple[str, str], int]:
    """(method, N) -> pairs selected, from select_top's reports (results/<exp>/select/<method>.<N>.json)."""
    out = {}
    for p in paths:
        method, _, n = Path(p).name.removesuffix(".json").rpartition(".")
        data = json.loads(Path(p).read_text(encoding="utf-8"))
        if "selected" not in data:
            raise InputError(p, "no 'selected' count: not a select report")
        out[(method, n)] = int(data["selected"])
    return out


def runs_machines(path: str | Path) -> str:
    """The machines line (``marginmine.nmt.comparison.machines_line``) from the comparison's runs TSV
    (``compare --runs``: one row per trained system with its train and decode machine)."""
    from marginmine.nmt.comparison import machines_line

    rows = read_table(path, ["method", "N", "seed", "train_machine", "decode_machine"])
    systems = []
    for line, r in enumerate(rows, 2):
        if not r["seed"].isdigit():
            raise InputError(str(path), f"seed {r['seed']!r} is not a number", line=line,
                             hint="pass the runs TSV of marginmine compare (--runs)")
        systems.append((r["method"], r["N"], int(r["seed"]), r["train_machine"] or None, r["decode_machine"] or None))
    return machines_line(systems)
