"""The export check of issue 34: a ``laser`` encoder exported with ``marginmine export-encoder
--format laser`` embeds raw text in the official ``laser_encoders`` package as marginmine does.

For every encoder given, the script exports it to LASER's format (a temporary directory), embeds N
raw sentences per language with ``laser_encoders.SentenceEncoder`` (from the export, as its users
would) and with marginmine (``load_encoder`` on the encoder directory), and reports the largest
absolute difference between the L2-normalised embeddings, per language, and how many sentences
differ by more than 1e-5. Two more rows per encoder:

* ``prepared by the caller``: both given the sentences prepared by ``laser_format.normalize``
  (``laser_encoders`` prepares them again, and so does an encoder that records its preparation; an
  old one embeds them as given). For an old encoder this is issue 34's second measurement; Moses'
  normaliser is not idempotent, so it leaves a German residue;
* ``prepared twice``: ``laser_encoders`` given the prepared sentences, marginmine the raw ones;
* ``network on raw text``: the encoder's network without any text preparation (as an encoder trained
  before the preparation was recorded embeds) against ``laser_encoders`` on the raw sentences.

Encoders: ``--encoder`` (trained with the preparation recorded) and optionally ``--old`` (one
trained before; its manifest records no preparation and it embeds raw text).

Sentences: the first N lines of ``--en`` and ``--de``; by default WMT newstest2014 from the shared
data (FLORES devtest, which issue 34 measured on, is not in /work/shared/data; give its files as
``--en .../eng_Latn.devtest --de .../deu_Latn.devtest`` where it exists).

    .venv/bin/python bench/bench_laser_export.py --encoder work/laser-export-check/laser-cpu \
        [--old DIR] [--n 300] [--threads 1]

Writes bench/out/laser_export.json and bench/out/laser_export.md.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

DATA = REPO.parent / "shared" / "data"
NEWSTEST = DATA / "wmt-newstest-ende" / "newstest2014"


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def diff(a: np.ndarray, b: np.ndarray) -> dict[str, Any]:
    per = np.abs(a - b).max(axis=1)
    return {"max_abs_diff": float(per.max()), "sentences_over_1e-5": int((per > 1e-5).sum())}


def two_pass_sentences() -> list[str]:
    """Every German newstest sentence (2012-2019) whose preparation a second pass changes."""
    from marginmine.encoders.laser_format import normalize

    lines = [s for f in sorted(NEWSTEST.parent.glob("newstest20*.de"))
             for s in f.read_text(encoding="utf-8").splitlines()]
    return [s for s in lines if normalize(normalize(s)) != normalize(s)]


def check(encoder_dir: Path, sents: dict[str, list[str]], work: Path) -> dict[str, Any]:
    from laser_encoders.models import SentenceEncoder

    from marginmine.encoders.base import load_encoder, read_manifest
    from marginmine.encoders.laser import LaserEncoder
    from marginmine.encoders.laser_format import export_laser, normalize

    manifest = read_manifest(encoder_dir)
    info = manifest.get("info") or {}
    pt, spm, _ = export_laser(encoder_dir, work / encoder_dir.name)
    official = SentenceEncoder(str(pt), spm_model=str(spm), cpu=True, max_sentences=64)
    ours = load_encoder(encoder_dir)
    raw_net = LaserEncoder(ours.encoder, ours.dictionary, ours.sp, ours.langs, ours.dim)  # settings=None
    role = ("old: trained before the text preparation was recorded (raw text)" if info.get("settings") is None
            else "new: text prepared as LASER prepares it")
    out: dict[str, Any] = {"encoder": str(encoder_dir), "role": role, "settings": info.get("settings"),
                           "num_updates": info.get("num_updates"), "train_wps": info.get("train_wps"),
                           "minutes": info.get("minutes"), "langs": {}}
    for name, lines in sents.items():  # "de (second-pass cases)" is German
        lang = name.split(" ")[0]
        t0 = time.perf_counter()
        theirs = unit(official(lines))
        mine = ours.encode(lines, lang)
        prepared = [normalize(s) for s in lines]
        theirs_prepared = unit(official(prepared))
        row = {"marginmine": diff(mine, theirs),
               "prepared by the caller": diff(ours.encode(prepared, lang), theirs_prepared),
               "prepared twice": diff(mine, theirs_prepared),
               "network on raw text": diff(raw_net.encode(lines, lang), theirs),
               "changed by preparation": sum(normalize(s) != s for s in lines),
               "seconds": round(time.perf_counter() - t0, 1)}
        twice = [s for s in lines if normalize(normalize(s)) != normalize(s)]
        row["not idempotent"] = twice
        out["langs"][name] = row
    return out


def markdown(result: dict[str, Any]) -> str:
    lines = ["# Export check: `export-encoder --format laser` in `laser_encoders` against marginmine", "",
             f"{result['n']} raw sentences per language: {result['sentences']}; and the German newstest "
             "sentences (2012-2019) whose preparation a second pass of Moses' normaliser changes. Embeddings "
             "L2-normalised; max |diff| over all sentences and dimensions, and in brackets the sentences "
             "differing by more than 1e-5.",
             f"CPU: {result['cpu']}; torch threads {result['threads']}; {result['date']}.", ""]
    for enc in result["encoders"]:
        lines += [f"## `{enc['encoder']}` ({enc['role']})", "",
                  f"manifest settings: `{json.dumps(enc['settings'])}`; {enc['num_updates']} updates, "
                  f"{enc['minutes']} training minutes", "",
                  "| lang | raw text, both | text prepared by the caller, both | laser_encoders given "
                  "prepared text, marginmine raw | the network on raw text (no preparation) | sentences the "
                  "preparation changes |",
                  "|---|---|---|---|---|---|"]
        for lang, row in enc["langs"].items():
            cells = [f"{row[k]['max_abs_diff']:.3g} ({row[k]['sentences_over_1e-5']})" for k in
                     ("marginmine", "prepared by the caller", "prepared twice", "network on raw text")]
            lines.append(f"| {lang} | " + " | ".join(cells) + f" | {row['changed by preparation']} |")
        lines += ["", "Sentences whose preparation a second pass changes:", ""]
        lines += [f"- `{s}`" for s in enc["langs"]["de (second-pass cases)"]["not idempotent"]]
        lines.append("")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--encoder", type=Path, default=REPO / "work" / "laser-export-check" / "laser-cpu")
    ap.add_argument("--old", type=Path, help="an encoder trained before the text preparation was recorded")
    ap.add_argument("--en", type=Path, default=NEWSTEST.with_suffix(".en"))
    ap.add_argument("--de", type=Path, default=NEWSTEST.with_suffix(".de"))
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "out" / "laser_export")
    args = ap.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    sents = {lang: path.read_text(encoding="utf-8").splitlines()[: args.n]
             for lang, path in (("en", args.en), ("de", args.de))}
    sents["de (second-pass cases)"] = two_pass_sentences()
    result: dict[str, Any] = {"n": args.n, "sentences": {"en": str(args.en), "de": str(args.de)},
                              "cpu": cpu_model(), "threads": args.threads,
                              "date": time.strftime("%Y-%m-%d"), "encoders": []}
    with tempfile.TemporaryDirectory() as tmp:
        for d in (args.encoder, args.old):
            if d is not None:
                result["encoders"].append(check(d, sents, Path(tmp)))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n",
                                             encoding="utf-8")
    args.out.with_suffix(".md").write_text(markdown(result) + "\n", encoding="utf-8")
    print(markdown(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
