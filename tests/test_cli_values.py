"""Every numeric and choice option of every ``marginmine`` subcommand, given 0, -1, nan, a huge
number and a word: either the value is in the option's domain and the arguments are read, or the
command refuses it on one line naming the option, with exit status 2 - never a traceback. And every
subcommand run with its required files missing stops on one error line with exit status 2, as does a
command given values in range that its validated settings refuse."""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from marginmine.cli import values as domain
from marginmine.cli.main import build_parser, main, one_line

BAD = ["0", "-1", "nan", "inf", "1e30", str(10**30), "many"]


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    ap = build_parser()
    sub = next(a for a in ap._actions if isinstance(a, argparse._SubParsersAction))
    return {name: p for name, p in sub.choices.items() if not any(a.dest == "rest" for a in p._actions)}


COMMANDS = _subparsers()


def _options(p: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in p._actions if a.option_strings and (a.type is not None or a.choices)]


def _filler(a: argparse.Action, tmp: Path) -> list[str]:
    """A value the option accepts: its domain's lower end, its first choice, or a missing file."""
    if isinstance(a.type, (domain.Whole, domain.Real)):
        low = a.type.lo if a.type.lo is not None else 0
        value = str(low + 1 if getattr(a.type, "lo_open", False) else low)
    elif a.choices:
        value = str(next(iter(a.choices)))
    else:  # a file, or a value of its own format naming files (NAME=FILE, SRC_LANG,TGT_LANG,SRC,TGT ...)
        path = tmp / f"missing-{a.dest}"
        value = next((v for v in (str(path), f"en,de,{path},{path}", f"x={path}", f"{path},{path}", "0,1")
                      if _accepts(a, v)), str(path))
    return [value] * (a.nargs if isinstance(a.nargs, int) else 1)


def _accepts(a: argparse.Action, value: str) -> bool:
    try:
        (a.type or str)(value)
    except Exception:  # noqa: BLE001 - any refusal
        return False
    return True


def _required(p: argparse.ArgumentParser, tmp: Path, skip: argparse.Action | None = None) -> list[str]:
    out: list[str] = []
    for a in p._actions:
        if a.required and a is not skip:
            out += ([a.option_strings[0]] if a.option_strings else []) + _filler(a, tmp)
    return out


def _parse(argv: list[str]) -> tuple[int | None, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            build_parser().parse_args(argv)
        except SystemExit as exc:
            return int(exc.code or 0), err.getvalue()
    return None, err.getvalue()


def test_every_numeric_option_declares_its_domain() -> None:
    bare = [f"{name} {a.option_strings[0]}" for name, p in COMMANDS.items() for a in p._actions
            if a.type in (int, float)]
    assert not bare, f"options typed int/float, not a cli.values domain: {bare}"
    numeric = [a for p in COMMANDS.values() for a in p._actions if isinstance(a.type, (domain.Whole, domain.Real))]
    assert len(numeric) >= 80  # the command line's numbers (85 when this test was written)


CASES = [(name, a.option_strings[0]) for name, p in COMMANDS.items() for a in _options(p)]


@pytest.mark.parametrize("command,option", CASES, ids=[f"{c} {o}" for c, o in CASES])
def test_a_bad_value_is_one_error_line(command: str, option: str, tmp_path: Path) -> None:
    p = COMMANDS[command]
    action = next(a for a in p._actions if option in a.option_strings)
    base = [command, *_required(p, tmp_path, skip=action)]
    checked = 0
    for value in BAD:
        try:
            accepted = action.type(value) is not None if action.type else True
            if action.choices is not None:
                accepted = accepted and (action.type(value) if action.type else value) in action.choices
        except Exception:  # noqa: BLE001 - the option's own parser refused it (any kind of error)
            accepted = False
        code, err = _parse([*base, option, value])
        if accepted:
            assert code is None, f"{command} {option} {value}: refused although in its domain: {err}"
            continue
        checked += 1
        assert code == 2, f"{command} {option} {value}: exit {code}"
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"marginmine {command}: error: argument {option}"), err
        assert "Traceback" not in err
    assert checked >= 1, f"{command} {option}: every bad value was accepted"


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_command_with_its_files_missing_stops_on_one_line(command: str, tmp_path: Path) -> None:
    """The required options filled with files that do not exist (numbers at their domain's lower
    end): the command names what is missing in one line and exits 2."""
    argv = [command, *_required(COMMANDS[command], tmp_path)]
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:
            code = int(exc.code or 0)
    lines = [x for x in err.getvalue().splitlines() if " error: " in x or "Traceback" in x]
    assert code == 2, f"{argv}: exit {code}\n{err.getvalue()[-2000:]}"
    assert len(lines) == 1 and lines[0].startswith(f"marginmine {command}: error: "), err.getvalue()[-2000:]


def test_a_value_its_settings_refuse_is_one_error_line(tmp_path: Path) -> None:
    """Values each in range that the validated settings refuse together (fewer maximum than minimum
    tokens): one line and exit 2, the traceback only with --debug."""
    src = tmp_path / "c.tsv"
    src.write_text("Ein Haus.\tA house.\n", encoding="utf-8")
    argv = ["preprocess", "--input", str(src), "--src-lang", "de", "--tgt-lang", "en", "--min-tokens", "10",
            "--max-tokens", "5", "--output", str(tmp_path / "k.tsv"), "--rejects", str(tmp_path / "r.tsv"),
            "--ledger", str(tmp_path / "l.json"), "--no-langid"]
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main(argv)
    lines = [x for x in err.getvalue().splitlines() if " error: " in x or "Traceback" in x]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("marginmine preprocess: error: "), err.getvalue()
    with pytest.raises(ValueError):
        main(["--debug", *argv])


#: commands given values each option accepts that the settings built from them refuse (a settings
#: class, a score kind's parameters, a corpus builder's checks): (command, arguments, the refusal)
REFUSED = [
    ("preprocess", ["--input", "c.tsv", "--src-lang", "de", "--tgt-lang", "en", "--no-langid", "--min-tokens", "10",
                    "--max-tokens", "5", "--output", "k.tsv", "--rejects", "r.tsv", "--ledger", "l.json"],
     "min_tokens 10 > max_tokens 5"),
    ("mine", ["--src", "s.txt", "--tgt", "t.txt", "--src-lang", "en", "--tgt-lang", "de", "--encoder", "enc",
              "--min-tokens", "10", "--max-tokens", "5", "--output", "m.tsv"], "min_tokens 10 > max_tokens 5"),
    ("demo-corpus", ["--data-dir", "data", "--output", "o.tsv", "--labels", "l.tsv", "--scale", "2"],
     "scale must be in (0, 1]"),
    ("heldout", ["--src", "s.txt", "--tgt", "t.txt", "--size", "5", "--out-src", "a.txt", "--out-tgt", "b.txt"],
     "needs 5 distinct pairs"),
    ("score", ["--input", "c.tsv", "--src-embeddings", "x.npy", "--tgt-embeddings", "y.npy", "--output", "s.tsv",
               "--scorers", '{"r": {"kind": "ratio", "k": 0}}'], "k must be a positive integer"),
    ("fit-scorer", ["--scorers", '{"c": {"kind": "calibrated", "hidden": 0}}', "--name", "c", "--encoder", "enc",
                    "--held-out", "en,de,s.txt,t.txt", "--src-lang", "en", "--tgt-lang", "de", "--output", "head"],
     "hidden and steps must be >= 1"),
    ("eval-mining", ["--encoder", "e=enc", "--scorers", '{"m": {"kind": "mlp", "band": 2}}', "--data", "bucc",
                     "--src-lang", "en", "--tgt-lang", "de", "--tsv", "t.tsv", "--md", "t.md"],
     "band must be in (0, 1]"),
    # refused before torch's BPE and fairseq's binarizing run (fairseq's own refusal was its usage text)
    ("train-nmt", ["--train", "c.tsv", "--dev-src", "s.txt", "--dev-ref", "t.txt", "--workdir", "w",
                   "--src-lang", "en", "--tgt-lang", "de", "--params", '{"lr": "x"}'],
     "NMT param lr must be a number >= 0 (got 'x')"),
]


@pytest.mark.parametrize("command,argv,refusal", REFUSED, ids=[c for c, _, _ in REFUSED])
def test_values_the_settings_refuse_are_one_error_line(command: str, argv: list[str], refusal: str,
                                                       tmp_path: Path) -> None:
    """Run as a user would (a process of its own, nothing captured in between): exit 2 and stderr is
    one line, ``marginmine CMD: error: ...`` naming the refusal, before any file is written."""
    (tmp_path / "c.tsv").write_text("Ein Haus.\tA house.\n", encoding="utf-8")
    (tmp_path / "s.txt").write_text("A house.\n", encoding="utf-8")
    (tmp_path / "t.txt").write_text("Ein Haus.\n", encoding="utf-8")
    before = sorted(p.name for p in tmp_path.iterdir())
    r = subprocess.run([sys.executable, "-m", "marginmine.cli", "-q", command, *argv], cwd=tmp_path,
                       capture_output=True, text=True, timeout=300)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and "Traceback" not in r.stderr, (r.returncode, r.stderr[-2000:])
    assert len(lines) == 1 and lines[0].startswith(f"marginmine {command}: error: ") and refusal in lines[0], r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_a_refusal_of_several_lines_is_printed_on_one(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A ValueError whose message spans lines still gives one error line (its lines joined)."""
    import marginmine.cli.data as cli_data

    def refuse(args: argparse.Namespace) -> int:
        raise ValueError("first line\n  second line\n")

    monkeypatch.setattr(cli_data, "cmd_heldout", refuse)
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main(["heldout", "--src", "s", "--tgt", "t", "--size", "1", "--out-src", str(tmp_path / "a"),
                     "--out-tgt", str(tmp_path / "b")])
    assert code == 2 and err.getvalue() == "marginmine heldout: error: first line; second line (--debug shows where)\n"
    assert one_line(ValueError()) == "ValueError"


@pytest.mark.parametrize("torch_first", [False, True])
def test_threads_reach_torch_whether_or_not_it_is_loaded_yet(torch_first: bool) -> None:
    """``--threads N`` pins torch to N threads without importing it (a command that never needs torch,
    e.g. scoring precomputed embeddings, does not pay its import): set at once when torch is loaded,
    through OpenMP's environment when it is loaded later."""
    code = ("import sys\n"
            + ("import torch\n" if torch_first else "")
            + "from marginmine.cli.options import torch_threads\n"
              "torch_threads(1)\n"
              "loaded = 'torch' in sys.modules\n"
              "import torch, faiss\n"
              "print(loaded, torch.get_num_threads(), faiss.omp_get_max_threads())\n")
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}  # conftest's
    default = subprocess.run([sys.executable, "-c", "import torch, faiss; print(torch.get_num_threads(), "
                              "faiss.omp_get_max_threads())"], capture_output=True, text=True, check=True,
                             env=env).stdout.split()
    assert int(default[0]) > 1 and int(default[1]) > 1, default  # 1 thread is not what they would take anyway
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env=env).stdout.split()
    assert out == [str(torch_first), "1", "1"], out


def test_cpu_decoding_does_not_import_torch() -> None:
    """A CPU device is resolved without torch, and CTranslate2 decoding looks for a GPU with its own
    library: a translation job (fourteen of them in the published suite) starts 2-4 s sooner."""
    code = ("import sys\n"
            "from marginmine.nmt.ctdecode import gpu_visible\n"
            "from marginmine.nmt.params import resolve_device\n"
            "print(resolve_device('cpu'), resolve_device('auto', gpu_visible), 'torch' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["cpu", "cpu", "False"], out
