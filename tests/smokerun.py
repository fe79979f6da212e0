"""The smoke experiment (config/test.yaml) as the tests run it: its command, one session-wide run
(the ``smoke`` fixture in conftest.py) and the outputs a rerun must reproduce byte for byte."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

from test_workflow import copy_workflow, snakemake

TARGETS = ("all", "preprocess", "encoders", "scoring", "report_figures", "results/test/comparison.tsv")
SHARDS = ("0000", "0001")
K = 4                 # config/test.yaml scoring.k


def smoke_command(real_data: Path, *config: str) -> list[str]:
    """The smoke experiment's snakemake arguments; ``config`` adds ``key=value`` overrides."""
    return [*TARGETS, "--configfile", "config/test.yaml", "--cores", "2", "--config", f"data_dir={real_data}",
            *config]


def run_smoke(d: Path, real_data: Path, timeout: float = 1500) -> subprocess.CompletedProcess[str]:
    return snakemake(*smoke_command(real_data), cwd=d, timeout=timeout)


def smoke_run(d: Path, real_data: Path) -> Path:
    """The workflow copied into ``d`` and the smoke experiment run there to the end."""
    copy_workflow(d)
    r = run_smoke(d, real_data)
    assert r.returncode == 0, (r.stdout + r.stderr)[-4000:]
    return d


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def final_outputs(d: Path, methods: tuple[str, ...] = ("ratio", "random")) -> dict[str, str]:
    """SHA-256 of every output a rerun must reproduce byte for byte (BLEU by its numbers), for the
    selection ``methods`` run (the method-set tables only when both smoke methods ran)."""
    out = {}
    patterns = ["work/test/score/*.scores.tsv.gz", "work/test/embed/*.npy", "results/test/preprocess/ledger.json",
                "results/test/preprocess/ledger.tsv", "work/test/preprocess/kept/*.tsv.gz",
                "results/test/encoder/model.pt"]
    patterns += [f"work/test/select/{m}.2k.tsv.gz" for m in methods]
    patterns += [f"results/test/nmt/{m}.2k/bleu.hyp/*.de" for m in methods]  # every hypothesis: the model
    if set(methods) == {"ratio", "random"}:
        patterns.append("results/test/select/composition.tsv")
    for pattern in patterns:
        for p in sorted(d.glob(pattern)):
            out[str(p.relative_to(d))] = sha256(p)
    numbers = ("bleu", "tok_bleu", "precisions", "hyp_len", "ref_len", "lines")  # not seconds, not paths
    for m in methods:
        p = d / f"results/test/nmt/{m}.2k/bleu.json"
        b = json.loads(p.read_text())
        out[str(p.relative_to(d))] = json.dumps({s: {k: b[s][k] for k in numbers} for s in ("test", "dev")})
    rows = (d / "results/test/comparison.tsv").read_text().splitlines()
    out["comparison (method, N, pairs, dev, test)"] = "\n".join(
        "\t".join(r.split("\t")[:5]) for r in rows if r.split("\t")[0] in ("method", *methods))
    return out
