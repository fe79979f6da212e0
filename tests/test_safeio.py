"""No command writes over its own input or over another of its outputs; outputs appear only when
complete; compressed outputs are byte-deterministic."""

from __future__ import annotations

import gzip
import hashlib
import importlib
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from marginmine.cli.paths import PATHS
from marginmine.errors import InputError
from marginmine.io.safe import AtomicWriter, Role, check_paths, temporary, write_text
from marginmine.io.text import open_text_out
from marginmine.preprocess.ledger import Ledger

cli = importlib.import_module("marginmine.cli.main")  # the module (the package's `main` is the function)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def run_cli(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "marginmine.cli.main", *argv], cwd=cwd, capture_output=True,
                          text=True, timeout=120)


def test_the_reported_data_loss_is_refused(paracrawl_tsv: Path, tmp_path: Path) -> None:
    """The issue's command: the .tsv written beside the ledger (corpus.tsv) was the user's corpus."""
    corpus = tmp_path / "corpus.tsv"
    corpus.write_bytes(b"".join(paracrawl_tsv.read_bytes().splitlines(keepends=True)[:500]))
    before = sha256(corpus)
    r = run_cli("preprocess", "--src-lang", "en", "--tgt-lang", "de", "--input", "corpus.tsv", "--columns", "2,3",
                "--output", "kept.tsv", "--rejects", "rejects.tsv", "--ledger", "corpus.json", cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    line = r.stderr.strip().splitlines()[-1]
    assert "corpus.json" in line and "corpus.tsv" in line and "never writes over" in line, line
    assert "(the .tsv written beside --ledger corpus.json)" in line, line
    assert sha256(corpus) == before
    assert not (tmp_path / "kept.tsv").exists() and not (tmp_path / "corpus.json").exists()


# one command line per subcommand whose output (or a file derived from it) is one of its inputs
CLASHES: dict[str, list[str]] = {
    "preprocess": ["--src-lang", "en", "--tgt-lang", "de", "--input", "in.tsv", "--output", "in.tsv",
                   "--rejects", "r.tsv", "--ledger", "l.json"],
    "split": ["--input", "in.tsv", "--shards", "2", "--outdir", ".", "--prefix", "in", "--rejects", "in.tsv",
              "--ledger", "l.json"],
    "ledger": ["--first", "in.json", "--output", "in.json"],
    "extract": ["--archive", "in.tgz", "--member", "x", "--output", "in.tgz"],
    "fetch-testset": ["--test-set", "wmt14", "--langpair", "en-de", "--src", "o.txt", "--ref", "o.txt"],
    "demo-corpus": ["--data-dir", "data", "--output", "data/in.tsv", "--labels", "l.tsv"],
    "scale-corpus": ["--data-dir", "data", "--output", "data/in.tsv", "--labels", "l.tsv"],
    "check-overlap": ["--corpus", "in.tsv", "--protect", "p.txt", "--output", "p.txt"],
    "tatoeba-share": ["--data-dir", "data", "--en", "o.txt", "--de", "o.txt"],
    "heldout": ["--src", "in.txt", "--tgt", "in2.txt", "--size", "1", "--out-src", "o.txt", "--out-tgt", "in2.txt"],
    "encoder-data": ["--sources", "[]", "--outdir", "data", "--protect", "data/in.tsv"],
    "train-encoder": ["--kind", "dual", "--data", "data/in.tsv", "--output", "data"],
    "embed": ["--encoder", "data", "--lang", "en", "--input", "in.txt", "--output", "data/in.tsv"],
    "eval-encoder": ["--encoder", "data", "--name", "x", "--set", "a,tatoeba,de,en,in.txt,in2.txt",
                     "--output", "data/in.tsv"],
    "encoder-report": ["--inputs", "in.json", "--tsv", "in.json", "--md", "o.md"],
    "score": ["--input", "in.tsv", "--output", "in.tsv", "--src-embeddings", "a.npy", "--tgt-embeddings", "b.npy"],
    "mine": ["--src", "in.txt", "--tgt", "in2.txt", "--src-lang", "en", "--tgt-lang", "de", "--encoder", "data",
             "--output", "in2.tsv", "--ledger", "in2.json"],  # the .tsv written beside the ledger is the output
    "select": ["--pairs", "in.tsv", "--method", "random", "-n", "1", "--output", "o.tsv", "--report", "o.tsv"],
    "claims": ["--results", "data", "--size", "20k", "--tsv", "o.tsv", "--md", "o.tsv"],
    "shortcut-check": ["--scorers", "{}", "--encoder", "x=data", "--test", "in.txt", "in2.txt", "l.tsv",
                       "--src-lang", "en", "--tgt-lang", "de", "--tsv", "in.txt", "--md", "o.md"],
    "clean-share": ["--scores", "s.tsv", "--baselines", "in.tsv", "--tsv", "o.tsv", "--md", "m.md",
                    "--curve", "in.tsv"],
    "composition": ["--labels", "l.tsv", "--selections", "in.tsv", "--tsv", "l.tsv", "--md", "o.md"],
    "bucc-data": ["--gold-train", "train.src,in2.txt", "--gold-test", "a,b", "--mono-src", "m", "--mono-tgt",
                  "n", "--output-dir", "."],
    "eval-mining": ["--encoder", "x=data", "--data", "bucc", "--src-lang", "en", "--tgt-lang", "de",
                    "--tsv", "o.md", "--md", "o.md"],
    "eval-filter": ["--paracrawl", "in.tsv", "--tsv", "o.tsv", "--md", "in.tsv"],
    "fit-scorer": ["--scorers", '{"c": {"kind": "calibrated"}}', "--name", "c", "--encoder", "data",
                   "--held-out", "en,de,in.txt,in2.txt", "--src-lang", "en", "--tgt-lang", "de", "--output", "."],
    "train-nmt": ["--train", "in.tsv", "--dev-src", "in.txt", "--dev-ref", "in2.txt", "--workdir", "in.txt",
                  "--src-lang", "en", "--tgt-lang", "de"],
    "evaluate": ["--workdir", "data", "--test-src", "in.txt", "--test-ref", "in2.txt", "--output", "in.txt"],
    "compare": ["--inputs", "in.json", "--headline", "ratio", "--tsv", "o.tsv", "--md", "o.md", "--png", "in.json"],
    "headline": ["--inputs", "in.json", "--output", "in.json"],
    "summary": ["--scorers", "{}", "--sizes", "1k", "--comparison", "in.tsv", "--tsv", "o.tsv", "--md", "in.tsv"],
    "wall-times": ["in.tsv", "--md", "in.tsv"],
    "docs-results": ["--results", "data", "--output", "data/in.tsv"],
    "report-figures": ["--work", "w", "--outdir", ".", "--ledger", "tables.html"],
    "removed-sample": ["--rejects", "in.tsv", "--shard", "0", "--output", "in.tsv"],
    "report-samples": ["--pairs", "in.tsv", "--scores", "a=in2.txt", "--html", "o.html", "--scores-tsv", "o.tsv",
                       "--disagree-tsv", "d.tsv", "--removed-tsv", "in2.txt"],
    "export-encoder": ["--encoder", "data", "--output", "data"],
    "export-filtered": ["--selection", "in.tsv", "--tsv", "o.tsv", "--src", "in.tsv", "--tgt", "o.de"],
    "translate": ["--workdir", "data", "--src-lang", "en", "--tgt-lang", "de", "--input", "in.tsv", "--column", "0",
                  "--output", "o.de", "--stats", "in.tsv"],
    "translator-data": ["--encoder-data", "in.json", "--src-lang", "en", "--tgt-lang", "de", "--output", "o.tsv",
                        "--report", "in.json"],
    "eval-similarity": ["--encoder", "x=data", "--name", "m", "--src-lang", "en", "--set",
                        "t,tatoeba,de,en,in.txt,in2.txt", "--output", "data/in.tsv"],
    "audit-sample": ["--pairs", "in.tsv", "--scores", "in2.txt", "--scorer", "x", "--tsv", "in.tsv", "--plan",
                     "p.json", "--html", "o.html"],
    "audit-fill": ["--sample", "in.tsv", "--labels", "l.tsv", "--output", "in.tsv"],
    "audit-estimate": ["--labels", "in.tsv", "--tsv", "o.tsv", "--md", "o.md", "--json", "o.json", "--png", "in.tsv"],
    "vote-report": ["--encoder", "data", "--src-lang", "en", "--tgt-lang", "de", "--set",
                    "t,in.txt,in2.txt,p.txt,l.tsv", "--tsv", "o.tsv", "--md", "p.txt"],
}


def test_every_command_declares_its_paths() -> None:
    commands = set(cli.build_parser()._subparsers._group_actions[0].choices)  # type: ignore[union-attr]
    assert commands == set(PATHS)
    assert commands - set(CLASHES) == {"download"}  # one output, no input: nothing to clash with


@pytest.mark.parametrize("command", sorted(CLASHES))
def test_command_refuses_to_write_over_an_input(command: str, tmp_path: Path) -> None:
    for name in ("in.tsv", "in.txt", "in2.txt", "in.json", "in.tgz", "p.txt", "data/in.tsv", "l.tsv", "train.src",
                 "tables.html"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(f"{name} must survive\n")
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    r = run_cli(command, *CLASHES[command], cwd=tmp_path)
    assert r.returncode == 2, (r.returncode, r.stderr[-2000:])
    line = r.stderr.strip().splitlines()[-1]
    assert line.startswith(f"marginmine {command}: error:") and ("is the input" in line or "are the same file" in line
                                                                 or "inside" in line or "of the input" in line), line
    after = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    assert after == before, "a refused command changed files"


def test_links_and_derived_files_are_resolved(tmp_path: Path) -> None:
    real = tmp_path / "corpus.tsv"
    real.write_text("x\n")
    (tmp_path / "link.tsv").symlink_to(real)
    os.link(real, tmp_path / "hard.tsv")
    for alias in ("link.tsv", "hard.tsv", "sub/../corpus.tsv"):
        with pytest.raises(InputError, match="is the input"):
            check_paths([Role("--input", real)], [Role("--output", tmp_path / alias)])
    with pytest.raises(InputError, match="are the same file"):
        check_paths([], [Role("--a", tmp_path / "o.tsv"), Role("--b", tmp_path / "x" / ".." / "o.tsv")])
    with pytest.raises(InputError, match="inside the output directory"):
        check_paths([Role("--input", real)], [Role("--outdir", tmp_path, True)])
    check_paths([Role("--input", real)], [Role("--output", tmp_path / "other.tsv")])  # no clash: no error
    with pytest.raises(InputError, match="same file"):  # a ledger named .tsv would be its own TSV
        Ledger().write(tmp_path / "l.tsv")


def test_atomic_writer_leaves_old_content_on_error(tmp_path: Path) -> None:
    out = tmp_path / "o.tsv.gz"
    write_text(out, "old\n")
    with pytest.raises(RuntimeError):
        with open_text_out(out) as fh:
            fh.write("half\n")
            assert temporary(out).exists() and gzip.open(out, "rt").read() == "old\n"
            raise RuntimeError("killed")
    assert gzip.open(out, "rt").read() == "old\n" and not temporary(out).exists()
    w = AtomicWriter(out)
    w.write("new\n")
    w.close()
    assert gzip.open(out, "rt").read() == "new\n" and [p.name for p in tmp_path.iterdir()] == ["o.tsv.gz"]


def test_gzip_outputs_are_byte_deterministic(tmp_path: Path) -> None:
    digests = set()
    for name in ("a.tsv.gz", "b.tsv.gz"):
        with open_text_out(tmp_path / name) as fh:
            fh.write("ein Satz\tone sentence\n" * 100)
        write_text(tmp_path / f"w{name}", "ein Satz\tone sentence\n" * 100)
        digests |= {sha256(tmp_path / name), sha256(tmp_path / f"w{name}")}
        time.sleep(1.1)  # gzip's header time has one-second resolution
    assert len(digests) == 1
