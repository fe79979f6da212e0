"""CPU embedding speed of the pre-trained encoders' networks, which cannot be downloaded here.

The cost estimate (marginmine.workflow.estimate) needs sentences per second on 2 cores for every
encoder kind. LASER2 and LaBSE cannot be downloaded on this machine, but their speed does not depend
on their weights: this script builds each network at its published shape with random weights and
embeds real sentences the way the kind does on a CPU.

* ``laser-pretrained`` (LASER2): our BiLSTM (:func:`marginmine.encoders.laser_format.build_lstm`,
  tested against laser_encoders' ``LaserLstmEncoder``) with LASER2's shape - 50,004 tokens, embedding
  320, 5 bidirectional layers of 512 - batched as the kind batches (``max_tokens`` 12,000,
  ``max_sentences`` 512, longest first), max-pooled.
* ``sentence-transformers`` (LaBSE): a BERT-base encoder (12 layers, 768 wide, 12 heads, 3,072 feed
  forward, LaBSE's 501,153-token vocabulary) from ``transformers`` with random weights, batches of 64
  sorted by length (sentence-transformers' ``encode``), CLS pooling, a 768 x 768 dense layer, L2.

Token ids: LASER2's sentencepiece model and LaBSE's wordpiece vocabulary are not here, so each
sentence is cut by a 16,000-piece BPE sentencepiece model trained here on the sentences' own
languages (en + de); the published models' pieces per sentence differ (a 50,000-piece model over 93
languages, 501,153 wordpieces over 109), which the output states beside the rate.

    .venv/bin/python bench/bench_pretrained_shapes.py [--sentences 4000] [--threads 2]
Writes bench/out/pretrained_shapes.{json,md}.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "bench"))

from marginmine.encoders.laser_format import batches, build_lstm  # noqa: E402
from marginmine.io.text import read_lines  # noqa: E402
from marginmine.machine import machine as machine_line  # noqa: E402
from measure import best_of, write_results  # noqa: E402

SOURCES = ("wmt-newstest-ende/newstest2017.en", "wmt-newstest-ende/newstest2017.de",
           "tatoeba-manythings-deu-eng-2018/train.nooverlap.en", "tatoeba-manythings-deu-eng-2018/train.nooverlap.de")


def sentences(data_dir: Path, n: int) -> list[str]:
    """``n`` real sentences: a quarter from each of news en/de and Tatoeba en/de."""
    out: list[str] = []
    for rel in SOURCES:
        out += [s for s in read_lines(data_dir / rel) if s.strip()][: n // len(SOURCES)]
    return out


def bpe_ids(sents: list[str], work: Path, vocab: int = 16000) -> list[np.ndarray]:
    import sentencepiece as spm

    work.mkdir(parents=True, exist_ok=True)
    text = work / "train.txt"
    pool = [s for rel in SOURCES for s in read_lines(DATA / rel)]
    text.write_text("\n".join(pool) + "\n", encoding="utf-8")
    spm.SentencePieceTrainer.train(input=str(text), model_prefix=str(work / "bpe"), vocab_size=vocab,
                                   model_type="bpe", character_coverage=0.9999, minloglevel=2)
    sp = spm.SentencePieceProcessor(model_file=str(work / "bpe.model"))
    return [np.asarray(sp.encode(s) + [2], np.int64) for s in sents]  # + EOS, as LASER's tokenizer


def laser2(ids: list[np.ndarray]) -> float:
    net = build_lstm({"padding_idx": 1, "num_embeddings": 50004, "embed_dim": 320, "hidden_size": 512,
                      "num_layers": 5, "bidirectional": True}).eval()
    ids = [np.minimum(t, 50003) for t in ids]

    def run() -> None:
        with torch.inference_mode():
            for _, batch, lengths in batches(ids, 1, 12000, 512):
                net(batch, lengths)

    return len(ids) / best_of(run, 3)


def labse(ids: list[np.ndarray]) -> float:
    from marginmine.encoders.sbert import _hide_broken_torchaudio

    _hide_broken_torchaudio()  # as the sentence-transformers kind does before importing transformers
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    net = BertModel(BertConfig(vocab_size=501153, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                               intermediate_size=3072, max_position_embeddings=512), add_pooling_layer=False).eval()
    dense = torch.nn.Linear(768, 768)
    order = np.argsort([-len(t) for t in ids], kind="stable")
    with_special = [np.r_[101, t[:-1][:510], 102] for t in ids]  # [CLS] pieces [SEP]

    def run() -> None:
        with torch.inference_mode():
            for start in range(0, len(order), 64):
                chunk = [with_special[i] for i in order[start:start + 64]]
                width = max(len(t) for t in chunk)
                batch = torch.zeros((len(chunk), width), dtype=torch.long)
                mask = torch.zeros((len(chunk), width), dtype=torch.long)
                for row, t in enumerate(chunk):
                    batch[row, : len(t)] = torch.from_numpy(t)
                    mask[row, : len(t)] = 1
                cls = net(input_ids=batch, attention_mask=mask).last_hidden_state[:, 0]
                torch.nn.functional.normalize(torch.tanh(dense(cls)), dim=1)

    return len(ids) / best_of(run, 2)


DATA = Path(os.environ.get("MARGINMINE_DATA_DIR", REPO.parent / "shared" / "data"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sentences", type=int, default=4000)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    out = REPO / "bench" / "out"
    out.mkdir(parents=True, exist_ok=True)
    sents = sentences(DATA, args.sentences)
    ids = bpe_ids(sents, out / "pretrained_shapes_bpe")
    pieces = float(np.mean([len(t) for t in ids]))
    rows = [{"kind": "laser-pretrained", "network": "LASER2's shape: BiLSTM 5 x 512 per direction, embedding 320, "
             "50,004 tokens", "sent_per_s": laser2(ids)},
            {"kind": "sentence-transformers", "network": "LaBSE's shape: BERT-base 12 x 768, 501,153 tokens, "
             "CLS + dense + L2", "sent_per_s": labse(ids)}]
    machine = f"{machine_line()}, {args.threads} threads, torch {torch.__version__}"
    result = {"machine": machine, "python": platform.python_version(), "sentences": len(sents),
              "pieces_per_sentence": pieces, "rows": rows}
    md = ["# Pre-trained encoders' networks on a CPU (random weights, published shapes)", "",
          f"Machine: {machine}. {len(sents):,} real sentences (newstest2017 and Tatoeba, en and de), "
          f"{pieces:.1f} pieces each on average (a 16,000-piece BPE trained here: the published models' own "
          "pieces are not here), best of the rounds.", "",
          "| kind | network | sentences/s |", "|---|---|---:|"]
    md += [f"| {r['kind']} | {r['network']} | {r['sent_per_s']:,.0f} |" for r in rows]
    write_results("pretrained_shapes", result, "\n".join(md) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
