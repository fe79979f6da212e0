"""The labelled audit proved on real labels by simulation (issue 47 items 4-5), and the noise
baseline bracketed by a random and a hard re-pairing.

Two fully labelled sets stand in for the person:

* the 2,000 human-labelled ParaCrawl v3 en-de pairs (label V = good), scored here as one batch, as
  ``marginmine eval-filter`` scores them, by each ``--encoders`` encoder's ratio margin and cosine;
* the demo corpus (its label sidecar's ``clean`` flag), read from a finished demo run
  (``--run``: its score files and noise baselines; the hard re-pairing scored here from its
  embeddings, shard by shard as the scoring job batched them).

For each set, scorer and N: draw ``--labels`` labels as ``marginmine audit-sample`` does, estimate,
compare with the labelled precision of the whole top N, over ``--seeds`` seeds; with the monotone
fit and without it (``marginmine audit-estimate --monotone``); beside it the clean share estimated
from the random re-pairing (the noise baseline) and from the hard re-pairing
(:meth:`marginmine.scoring.kinds.Batch.hard_repaired`).

    .venv/bin/python bench/bench_audit.py --run /path/to/clone \\
        --encoders use=work/demo/encoders/use dan=work/demo/encoders/dan

Writes bench/out/audit.json and bench/out/audit.md (the tables of bench/RESULTS.md).
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

PARACRAWL = "paracrawl-human-eval-en-de/paracrawl-v3-validation-data.sorted.en-de.tsv"
KINDS = {"ratio": {"kind": "ratio"}, "cosine": {"kind": "cosine"}}


def cpu() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


def scored(batch, settings) -> tuple[dict, dict, dict]:  # noqa: ANN001
    """Scores of the batch, of its random re-pairing and of its hard re-pairing (lines that are
    still pairs of the batch left out)."""
    from marginmine.scoring.files import score_kinds

    s = score_kinds(batch, settings)
    out = []
    for re_paired in (batch.repaired((1234, 0)), batch.hard_repaired()):
        keep = ~re_paired.original_pairs()
        out.append({n: v[keep] for n, v in score_kinds(re_paired, settings).items()})
    return s, out[0], out[1]


def paracrawl_sets(data: Path, encoders: dict[str, str]) -> list[tuple[str, str, np.ndarray, np.ndarray, dict]]:
    from marginmine.encoders.base import load_encoder
    from marginmine.evaluate.filtereval import read_paracrawl_eval
    from marginmine.scoring import parse_scorers
    from marginmine.scoring.files import EncoderEmbeddings, ScoreSettings, make_batch

    d = read_paracrawl_eval(data / PARACRAWL)
    sets = []
    for enc, path in encoders.items():
        settings = ScoreSettings(tuple(parse_scorers(KINDS).items()), batch_size=len(d.src))
        batch = make_batch(d.src, d.tgt, 0, EncoderEmbeddings(load_encoder(path, "cpu"), "en", "de"), settings)
        s, rnd, hard = scored(batch, settings)
        for name in KINDS:
            sets.append(("paracrawl en-de", f"{enc}-{name}", s[name], d.positive,
                         {"random re-pairing": rnd[name], "hard re-pairing": hard[name]}))
    return sets


def demo_sets(run: Path, exp: str, encoders: dict[str, str]) -> list[tuple[str, str, np.ndarray, np.ndarray, dict]]:
    from marginmine.evaluate.filtereval import demo_labels
    from marginmine.io.text import iter_sentences
    from marginmine.scoring import parse_scorers
    from marginmine.scoring.embeddings import ArrayEmbeddings
    from marginmine.scoring.files import ScoreSettings, make_batch, read_scores

    work = run / "work" / exp
    shards = sorted((work / "preprocess" / "kept").glob("shard*.tsv.gz"))
    positive = demo_labels(work / "corpus" / f"{exp}.labels.tsv", shards, 2)[0]
    sets = []
    for enc in encoders:
        names = {f"{enc}-{k}" if enc != "dan" else k: k for k in KINDS}
        files = [work / "score" / enc / s.name.replace(".tsv.gz", ".scores.tsv.gz") for s in shards]
        settings = ScoreSettings(tuple((n, parse_scorers(KINDS)[k]) for n, k in names.items()), batch_size=10**9)
        parts: dict[str, list] = {n: [] for n in names}
        base: dict[str, list] = {n: [] for n in names}
        hard: dict[str, list] = {n: [] for n in names}
        for shard, f in zip(shards, files):
            stem = shard.name.removesuffix(".tsv.gz")
            emb = ArrayEmbeddings.load(work / "embed" / enc / f"{stem}.en.npy", work / "embed" / enc / f"{stem}.de.npy")
            src = list(iter_sentences(shard, column=0))
            tgt = list(iter_sentences(shard, column=1))
            batch = make_batch(np.asarray(src, object), np.asarray(tgt, object), 0, emb, settings)
            s, rnd, hd = scored(batch, settings)
            for n in names:
                stored = read_scores(f, n)
                if np.max(np.abs(stored - s[n])) > 2e-6:
                    raise SystemExit(f"{f}: {n} scored here differs from the run's by "
                                     f"{np.max(np.abs(stored - s[n])):.2g} (another batch size or k?)")
                parts[n].append(stored)
                base[n].append(read_scores(str(f).replace(".scores.", ".baseline."), n))
                hard[n].append(hd[n])
        for n in names:
            sets.append((f"demo corpus ({exp})", n, np.concatenate(parts[n]), positive,
                         {"random re-pairing": np.concatenate(base[n]), "hard re-pairing": np.concatenate(hard[n])}))
    return sets


def md_table(rows: list[dict]) -> str:
    cols = list(rows[0])
    return "\n".join(["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
                     + ["| " + " | ".join(str(r[c]) for c in cols) + " |" for r in rows]) + "\n"


def largest_n_only(args: argparse.Namespace, encoders: dict[str, str], t0: float) -> None:
    from marginmine.evaluate.audit_sim import largest_n_rows

    rows = []
    for sets, ns, labels in ((paracrawl_sets(args.data, encoders), [250, 500, 1000], 200),
                             (demo_sets(args.run, args.exp, encoders), [5000, 20000, 40000], 300)):
        for data, scorer, scores, positive, _ in sets:
            if scorer.endswith("ratio"):
                rows.append(largest_n_rows(data, scorer, scores, positive, ns, labels, args.strata,
                                           range(args.seeds), args.largest_n))
                print(rows[-1], flush=True)
    result = {"cpu": cpu(), "seconds": round(time.time() - t0, 1), "rows": rows}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "audit_largest_n.json").write_text(json.dumps(result, indent=1) + "\n")
    (args.out / "audit_largest_n.md").write_text(f"CPU: {result['cpu']}; {result['seconds']} s.\n\n" + md_table(rows))


def main() -> None:
    from marginmine.evaluate.audit_sim import simulation_rows

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run", type=Path, required=True,
                    help="a clone whose make demo finished (work/<exp>, results/<exp>)")
    ap.add_argument("--exp", default="demo")
    ap.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data")
    ap.add_argument("--encoders", nargs="+", default=["use=work/demo/encoders/use", "dan=work/demo/encoders/dan"],
                    help="NAME=DIR, relative to --run")
    ap.add_argument("--seeds", type=int, default=200)
    ap.add_argument("--strata", type=int, default=8)
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "out")
    ap.add_argument("--largest-n", type=float, default=None, metavar="TARGET",
                    help="only check the largest N at this precision target (ratio margins, --seeds seeds; "
                         "writes audit_largest_n.{json,md})")
    args = ap.parse_args()
    encoders = {e.split("=", 1)[0]: str(args.run / e.split("=", 1)[1]) for e in args.encoders}
    t0 = time.time()
    if args.largest_n is not None:
        largest_n_only(args, encoders, t0)
        return
    plans = [(paracrawl_sets(args.data, encoders), [250, 500, 1000], 200),
             (demo_sets(args.run, args.exp, encoders), [5000, 20000, 40000], 300)]
    tables: dict[str, list] = {"monotone fit": [], "each stratum its own rate": []}
    for sets, ns, labels in plans:
        for data, scorer, scores, positive, baselines in sets:
            for title, mono in (("each stratum its own rate", False), ("monotone fit", True)):
                rows = simulation_rows(data, scorer, scores, positive, ns, labels, args.strata, range(args.seeds),
                                       baselines if not mono else {}, monotone=mono)
                tables[title] += rows
                for r in rows:
                    print(title, {k: v for k, v in r.items() if k not in ("pairs", "seeds")}, flush=True)
    # how many labels for what interval width: the first scorer of each set, at its middle N
    tables["labels and interval width"] = []
    for sets, ns, _ in plans:
        data, scorer, scores, positive, _b = sets[0]
        for labels in (100, 200, 300, 500, 1000):
            sim = simulation_rows(data, scorer, scores, positive, [ns[1]], labels, args.strata, range(args.seeds))
            tables["labels and interval width"] += sim
            print(sim, flush=True)
    result = {"cpu": cpu(), "seconds": round(time.time() - t0, 1), "seeds": args.seeds, "strata": args.strata,
              "tables": tables}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "audit.json").write_text(json.dumps(result, indent=1) + "\n")
    text = (f"CPU: {result['cpu']}; {args.seeds} seeds per row; {args.strata} strata; "
            f"{result['seconds']} s in all.\n\n")
    for title, rows in tables.items():
        text += f"### The audit, {title}\n\n" + md_table(rows) + "\n"
    (args.out / "audit.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
