"""Every seed paper's headline claim beside ours (``marginmine claims``, rule ``published_claims``).

A claim is a comparison the paper reports (``A`` better than ``B`` on its metric) with the paper's
numbers and setting, typed here once (:data:`marginmine.report.claim_list.CLAIMS`, each with the
paper's table or section), and the same comparison measured by the pipeline: ``A``'s and ``B``'s
rows of one table the workflow wrote (:class:`Measure`). No number of ours is typed: a row or file
the run has not written is "not measured", naming it.

The verdict: ``agrees`` when our comparison goes the paper's way, ``contradicts`` when it goes the
other way, with ``not significant`` added at p >= 0.05. Every comparison is tested: BLEU and chrF by
the comparison tables' seed-aware paired bootstrap (the suite's ``comparison.tsv`` against its first
baseline, ``versus/<method>/comparison.tsv`` against the others of ``published.references``); the
other tables' rows from their items sidecars (:mod:`marginmine.evaluate.paired`: exact McNemar for
retrieval errors, a paired bootstrap for mining F1, ROC-AUC and precision at N). A comparison with
no test (a sidecar not built) says so in its row; ``not comparable``
when the settings differ in a way that decides the outcome (the claim says why), with our direction
given beside it.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from marginmine.errors import InputError, MarginmineError

#: the bootstrap p under which a difference counts as significant
ALPHA = 0.05


@dataclass(frozen=True)
class Measure:
    """``A``'s and ``B``'s value in ``column`` of ``file`` (a TSV below the results directory, or a
    composition table's summed ``share`` of groups whose name starts with ``clean:`` when ``column`` is
    ``clean_share``). Each row is picked by column = value pairs; ``better`` is ``higher`` or ``lower``,
    or ``same`` for a claim that the two do not differ (it holds when the test finds no significant
    difference, p >= :data:`ALPHA`)."""

    file: str
    column: str
    a: Mapping[str, str]
    b: Mapping[str, str]
    better: str = "higher"
    digits: int = 2


@dataclass(frozen=True)
class Claim:
    paper: str
    key: str
    claim: str
    paper_value: str
    paper_where: str
    paper_setting: str
    our_setting: str
    #: None: the pipeline does not measure it (``not_measured`` says what it would need)
    measure: Measure | None
    #: why our setting cannot test the claim (empty: comparable)
    not_comparable: str = ""
    not_measured: str = ""
    note: str = ""
    labels: tuple[str, str] = field(default=("A", "B"))


def _read(path: Path) -> list[dict[str, str]]:
    lines = path.read_text(encoding="utf-8").splitlines()
    if not lines:
        raise InputError(str(path), "empty table (no header)", hint="rebuild it with the workflow")
    head = lines[0].split("\t")
    return [dict(zip(head, line.split("\t"))) for line in lines[1:] if line]


def _pick(rows: Sequence[Mapping[str, str]], select: Mapping[str, str]) -> list[Mapping[str, str]]:
    return [r for r in rows if all(r.get(k) == v for k, v in select.items())]


def _value(rows: Sequence[Mapping[str, str]], m: Measure, select: Mapping[str, str], path: Path) -> float | None:
    if m.column == "clean_share":
        picked = [r for r in _pick(rows, select) if r.get("group", "").startswith("clean:")]
        return sum(float(r["share"]) for r in picked) if _pick(rows, select) else None
    picked = [r for r in _pick(rows, select) if r.get(m.column, "") not in ("", "nan")]
    if len(picked) > 1:
        raise InputError(str(path), f"{len(picked)} rows match {_where(select)}: a claim reads one",
                         hint="make the claim's selector name every key that tells the rows apart")
    return float(picked[0][m.column]) if picked else None


def _built(path: Path, tables: Collection[Path] | None) -> bool:
    """``path`` exists and, when the run names the tables it built (``tables``), is one of them: a
    table an earlier run left behind is never read."""
    return path.is_file() and (tables is None or path.resolve() in tables)


def _p_value(rows: Sequence[Mapping[str, str]], m: Measure, results: Path,
             tables: Collection[Path] | None,
             items: Mapping[Path, Sequence[Mapping[str, str]]] | None = None) -> tuple[float, str] | None:
    """The p of one row against the other and the test's name: from the table's items sidecar (if
    the run built one), else the bootstrap p of a comparison table or of a comparison against either
    method (``versus/<method>/comparison.tsv``), if the run built one."""
    from marginmine.io.items import items_path, read_items

    sidecar = items_path(results / m.file)
    if _built(sidecar, tables):
        from marginmine.evaluate.paired import compare

        lines = items[sidecar] if items is not None and sidecar in items else read_items(sidecar, where=(m.a, m.b))
        found = compare(lines, m.column, m.a, m.b)
        if found is not None:
            return found.p, found.label()
    p_col = "chrf_p" if m.column.startswith("chrf") else "p_value"
    tables = [rows, *(_read(results / "versus" / s["method"] / m.file) for s in (m.b, m.a)
                      if "method" in s and _built(results / "versus" / s["method"] / m.file, tables))]
    for table in tables:
        for one, other in ((m.a, m.b), (m.b, m.a)):
            for r in _pick(table, one):
                if "versus" in r and r.get("versus") == other.get("method") and r.get(p_col):
                    return float(r[p_col]), "seed-aware paired bootstrap"
    return None


def _p_text(p: float) -> str:
    return "p < 0.001" if p < 0.001 else f"p = {p:.3f}"


def _where(select: Mapping[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in select.items())


def _at_small_n(m: Measure) -> bool:
    """The claim's rows are picked at published.small's N."""
    return "{SMALL}" in (*m.a.values(), *m.b.values())


def _sized(m: Measure, size: str | None, small: str | None = None) -> Measure:
    """``m`` with ``{N}`` in its selectors replaced by ``size`` (the N the systems are trained at) and
    ``{SMALL}`` by ``small`` (published.small's N; the caller says "not measured" without it)."""
    def fill(select: Mapping[str, str]) -> dict[str, str]:
        if size is None and "{N}" in select.values():
            raise MarginmineError(f"claims: {m.file} rows are picked at an N: give the size (--size)")
        return {k: v.replace("{N}", size or "{N}").replace("{SMALL}", small or "{SMALL}") for k, v in select.items()}

    return replace(m, a=fill(m.a), b=fill(m.b))


def judge(claim: Claim, results: Path, size: str | None = None,
          tables: Collection[Path] | None = None, small: str | None = None,
          items: Mapping[Path, Sequence[Mapping[str, str]]] | None = None) -> dict[str, str]:
    """The claim's row: ours measured from ``results`` (the suite's directory; a ``../`` file is the
    experiment's) at ``size`` (the N of selectors that name ``{N}``), and the verdict. ``tables``: the
    resolved paths of the tables this run built (the workflow's inputs); others count as not written."""
    row = {"paper": claim.paper, "claim": claim.claim, "paper_value": claim.paper_value,
           "paper_where": claim.paper_where, "paper_setting": claim.paper_setting, "our_setting": claim.our_setting}
    if claim.measure is None:
        return {**row, "ours": f"not measured: {claim.not_measured}", "verdict": "not measured", "why": claim.note}
    if small is None and _at_small_n(claim.measure):
        return {**row, "ours": "not measured: published.small is not set (no systems at a small N)",
                "verdict": "not measured", "why": claim.note}
    m = _sized(claim.measure, size, small)
    path = results / m.file
    if not _built(path, tables):
        return {**row, "ours": f"not measured: {m.file} not written", "verdict": "not measured", "why": claim.note}
    rows = _read(path)
    a, b = _value(rows, m, m.a, path), _value(rows, m, m.b, path)
    missing = [_where(s) for s, v in ((m.a, a), (m.b, b)) if v is None]
    if missing:
        return {**row, "ours": f"not measured: no {m.column} for {'; '.join(missing)} in {m.file}",
                "verdict": "not measured", "why": claim.note}
    assert a is not None and b is not None
    tested = _p_value(rows, m, results, tables, items)
    ours = (f"{claim.labels[0]} {a:.{m.digits}f} vs {claim.labels[1]} {b:.{m.digits}f}"
            + (f" ({_p_text(tested[0])}, {tested[1]})" if tested is not None else " (no significance test)"))
    if m.better == "same":  # the claim is "no difference": the test decides
        way = ("not tested" if tested is None else
               "agrees (no significant difference)" if tested[0] >= ALPHA else "contradicts (a significant difference)")
    else:
        holds = a > b if m.better == "higher" else a < b
        way = "agrees" if holds else "contradicts" if a != b else "tie"
        if tested is not None and tested[0] >= ALPHA:
            way += ", not significant"
    verdict = way
    if claim.not_comparable:
        said = way.replace("agrees", "the same way").replace("contradicts", "the other way")
        verdict = f"not comparable (ours: {said})"
    why = "; ".join(x for x in (claim.not_comparable, claim.note) if x)
    return {**row, "ours": ours, "verdict": verdict, "why": why}


COLUMNS = ("paper", "claim", "paper_value", "paper_where", "paper_setting", "ours", "our_setting", "verdict", "why")


def _sidecar_lines(claims: Sequence[Claim], results: Path, size: str | None, tables: Collection[Path] | None,
                   small: str | None) -> dict[Path, list[dict[str, str]]]:
    """Each built items sidecar the claims test from, read once: the lines any of their rows pick
    (a quality sidecar holds millions of lines; each claim would otherwise stream it again)."""
    from marginmine.io.items import items_path, read_items

    wanted: dict[Path, list[Mapping[str, str]]] = {}
    for c in claims:
        if c.measure is None or (small is None and _at_small_n(c.measure)):
            continue
        m = _sized(c.measure, size, small)
        sidecar = items_path(results / m.file)
        if _built(sidecar, tables):
            wanted.setdefault(sidecar, []).extend((m.a, m.b))
    return {path: read_items(path, where=selects) for path, selects in wanted.items()}


def write_claims(claims: Sequence[Claim], results: str | Path, tsv: str | Path, md: str | Path, title: str,
                 size: str | None = None, tables: Sequence[str | Path] | None = None,
                 small: str | None = None) -> list[dict[str, str]]:
    """The claims table as TSV and Markdown (rows picked at ``size`` where a claim names ``{N}``, read
    only from ``tables`` when given); returns its rows."""
    from marginmine.io.safe import write_text

    built = None if tables is None else frozenset(Path(t).resolve() for t in tables)
    lines = _sidecar_lines(claims, Path(results), size, built, small)
    rows = [judge(c, Path(results), size, built, small, lines) for c in claims]

    def clean(v: str) -> str:
        return v.replace("\t", " ").replace("\n", " ")

    write_text(tsv, "".join("\t".join(clean(x) for x in r) + "\n"
                            for r in [list(COLUMNS), *([r[c] for c in COLUMNS] for r in rows)]))
    head = ("paper", "claim", "the paper", "ours", "verdict", "why")
    lines = [f"# {title}", "",
             "Each seed paper's headline comparison as the paper reports it (its numbers, table and setting) and "
             "the same comparison in this run, read from the file named (`marginmine claims`). Verdict: `agrees` / "
             "`contradicts` (our comparison goes the paper's way or the other), `not significant` when the "
             f"comparison's test gives p >= {ALPHA} (BLEU and chrF: the seed-aware paired bootstrap; retrieval "
             "errors: exact McNemar; mining F1, ROC-AUC, precision at N: a paired bootstrap over the items, "
             "two-sample where the rows saw different items); a claim of no difference `agrees` when its test finds "
             "none (`not tested` without a test); `not comparable` when the settings differ in a "
             "way that decides the outcome (why says how).", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [r["paper"], r["claim"], f"{r['paper_value']} ({r['paper_where']}; {r['paper_setting']})",
                 f"{r['ours']} ({r['our_setting']})", r["verdict"], r["why"] or " "]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    write_text(md, "\n".join(lines) + "\n")
    return rows
