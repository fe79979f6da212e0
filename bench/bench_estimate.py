"""What each way of running marginmine costs, as the plan estimates it (marginmine.workflow.estimate):
the demo, the own-corpus template with each encoder kind at 1M and 5M pairs on 2 cores, and the
paper's run (config.yaml). Nothing runs: each config is planned, as `snakemake -n` plans it, and its
"cost estimate" lines are collected (the rates behind them: bench/RESULTS.md; the own-corpus
template's pre-trained files are stand-ins the plan checks by digest only).

    .venv/bin/python bench/bench_estimate.py

Writes bench/out/estimate.json and bench/out/estimate.md (the table in bench/RESULTS.md;
tests/test_estimate.py renders it again and compares).
"""

from __future__ import annotations

import copy
import hashlib
import re
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "bench"))

#: the own-corpus template's encoders (config/own-corpus.yaml), each planned as the default
KINDS = {"usem": "use-multilingual", "laser2": "laser-pretrained", "labse": "sentence-transformers", "dan": "dual"}
SIZES = (1_000_000, 5_000_000)


def _validated(cfg: dict) -> dict:
    import yaml
    from snakemake.utils import validate  # the workflow's own validation fills the defaults

    validate(cfg, str(REPO / "config" / "schema.yaml"), set_default=True)
    return yaml.safe_load(yaml.safe_dump(cfg))


def _user_files(data: Path) -> dict:
    """The template's files in ``data`` (empty: the plan reads none) and stand-ins for the pre-trained
    encoders' files, pinned by their digests; returns the encoder.models overrides."""
    for name in ("corpus.tsv.gz", "dev.en", "dev.de", "test.en", "test.de"):
        (data / name).write_bytes(b"")
    (data / "models" / "LaBSE").mkdir(parents=True, exist_ok=True)
    (data / "models" / "LaBSE" / "modules.json").write_text("[]\n")
    pins = {}
    for key, name in (("model", "laser2.pt"), ("spm", "laser2.spm"), ("cvocab", "laser2.cvocab")):
        (data / "models" / name).write_bytes(f"stand-in for {name}\n".encode())
        pins[key] = hashlib.sha256((data / "models" / name).read_bytes()).hexdigest()
    clean = {"name": "clean", "src_lang": "en", "tgt_lang": "de",
             "source": {"kind": "local", "format": "parallel", "src": "dev.en", "tgt": "dev.de"}}
    return {"laser2": {"params": {"sha256": pins}}, "train": [clean]}


def plan_lines(cfg: dict) -> list[str]:
    from marginmine.workflow import Plan

    return [n for n in Plan.from_config(_validated(cfg), environ={}).notes if n.startswith("cost estimate")]


def runs(data_dir: Path) -> list[dict]:
    """Every run of the table; ``data_dir``: the real data the demo's plan checks for."""
    import yaml

    out = []
    demo = yaml.safe_load((REPO / "config" / "demo.yaml").read_text())
    demo["data_dir"] = str(data_dir)
    out.append({"run": "the demo (config/demo.yaml)", "pairs": demo["corpus"]["expected_pairs"],
                "lines": plan_lines(demo)})
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp)
        extra = _user_files(data)
        template = yaml.safe_load((REPO / "config" / "own-corpus.yaml").read_text())
        for name, kind in KINDS.items():
            for pairs in SIZES:
                cfg = copy.deepcopy(template)
                cfg["data_dir"] = str(data)
                cfg["corpus"]["expected_pairs"] = pairs
                cfg["encoder"]["default"] = name
                cfg["encoder"]["models"]["laser2"]["params"]["sha256"] = extra["laser2"]["params"]["sha256"]
                cfg["encoder"]["models"]["labse"]["params"]["sha256"] = {}
                if kind == "dual":
                    cfg["encoder"]["train"] = extra["train"]
                out.append({"run": f"own corpus, {kind} ({name})", "pairs": pairs, "lines": plan_lines(cfg)})
    paper = yaml.safe_load((REPO / "config.yaml").read_text())
    out.append({"run": "the paper (config.yaml)", "pairs": paper["corpus"]["expected_pairs"],
                "lines": plan_lines(paper)})
    return out


def _stage(lines: list[str], prefix: str) -> str:
    """The hours of the stages named ``prefix`` (``embed``: every encoder's), e.g. ``<= 24 CPU``; ``-``
    for a stage with no measured rate, ``""`` when the plan has none."""
    parts, bound, missing = {}, False, False
    for line in lines:
        m = re.match(rf"cost estimate, {re.escape(prefix)}[^:]*: (.*)$", line)
        if not m:
            continue
        hours = re.match(r"(at most )?([\d.,e+]+) (CPU|GPU)-hours", m.group(1))
        if hours is None:
            missing = True
            continue
        bound |= bool(hours.group(1))
        parts[hours.group(3)] = parts.get(hours.group(3), 0.0) + float(hours.group(2).replace(",", ""))
    if not parts:
        return "-" if missing else ""
    text = " + ".join(f"{v:,.3g} {unit}" for unit, v in parts.items())
    return ("<= " if bound else "") + text + (" + -" if missing else "")


def render(rows: list[dict]) -> str:
    """The Markdown table: per run its raw pairs, the CPU-/GPU-hours of each stage and the total."""
    from marginmine.workflow.estimate import RATES_MACHINE

    head = ("| run | raw pairs | preprocess (split + shards) | embed | score | train encoders | train NMT | total |\n"
            "|---|---:|---|---|---|---|---|---|")
    body = []
    for r in rows:
        lines = r["lines"]
        total = re.search(r"total: (.*?) \(rates", lines[-1]).group(1)
        missing = re.search(r"not counted: (.*)$", lines[-1])
        pre = " + ".join(x for x in (_stage(lines, "split"), _stage(lines, "preprocess")) if x)
        body.append(f"| {r['run']} | {r['pairs']:,} | {pre} | {_stage(lines, 'embed') or '-'} | "
                    f"{_stage(lines, 'score')} | {_stage(lines, 'train encoders')} | {_stage(lines, 'train NMT')} | "
                    f"{total}{'; not counted: ' + missing.group(1) if missing else ''} |")
    return (f"Rates of {RATES_MACHINE} (CPU, 2 cores; LASER2's and LaBSE's embedding: their networks' shapes on an "
            "Intel Xeon, bench_pretrained_shapes.py) and published GPU rates; \"<=\" is a time cap counted "
            "in full, \"-\" a stage with no measured rate (not counted). The demo's real wall time is far "
            "below its caps.\n\n" + head + "\n" + "\n".join(body) + "\n")


def main() -> int:
    import os

    from measure import write_results

    rows = runs(Path(os.environ.get("MARGINMINE_DATA_DIR") or REPO.parent / "shared" / "data"))
    write_results("estimate", rows, render(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
