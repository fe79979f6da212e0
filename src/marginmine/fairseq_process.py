"""Running fairseq's command-line tools as child processes, for both the LASER-style encoder and
the NMT systems: output streamed to our logger and a log file, a wall-clock budget, no orphaned
fairseq when the job itself is killed, and the numbers of its ``--log-format simple`` lines.

Every fairseq process we start runs ``python -m marginmine.fairseq_process TOOL ARGS...`` (see
:func:`fairseq_command`): fairseq's own ``fairseq_cli.TOOL`` after :func:`lean_fairseq`. At start-up
fairseq imports every task and criterion module it ships, to register them; three of them, used by
no tool we run (audio classification, sentence prediction), import scikit-learn, scipy.stats and
pandas: about 3 s of an 8 s start (CPU seconds, Xeon). :func:`lean_fairseq` leaves those three
unregistered. Nothing else changes: the same arguments, the same modules for translation and LASER,
the same bytes (the NMT and LASER kill and resume tests compare them)."""

from __future__ import annotations

import importlib.abc
import importlib.util
import logging
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from marginmine.errors import MarginmineError

log = logging.getLogger(__name__)

#: fairseq modules imported at start-up that no tool we run uses and that import scikit-learn, scipy.stats
#: and pandas (the adapters module imports the sentence-prediction criterion)
UNUSED_MODULES = frozenset({"fairseq.tasks.audio_classification", "fairseq.criterions.sentence_prediction",
                            "fairseq.criterions.sentence_prediction_adapters"})


class _Unregistered(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds :data:`UNUSED_MODULES` as empty modules: fairseq's import loop passes over them."""

    def find_spec(self, name: str, path: object = None, target: object = None) -> Any:
        return importlib.util.spec_from_loader(name, self) if name in UNUSED_MODULES else None

    def create_module(self, spec: Any) -> None:
        return None

    def exec_module(self, module: Any) -> None:
        module.__doc__ = "left unregistered by marginmine.fairseq_process.lean_fairseq"


def lean_fairseq() -> None:
    """Before fairseq is imported in this process: leave :data:`UNUSED_MODULES` unregistered (once)."""
    if not any(isinstance(f, _Unregistered) for f in sys.meta_path):
        sys.meta_path.insert(0, _Unregistered())


def fairseq_command(tool: str, *args: str) -> list[str]:
    """The command that runs fairseq's ``fairseq-<tool>`` (train, preprocess, generate) in a child
    process, through :func:`lean_fairseq`."""
    return [sys.executable, "-m", "marginmine.fairseq_process", tool, *args]


def _main(argv: Sequence[str]) -> None:
    """``python -m marginmine.fairseq_process TOOL ARGS...``: ``fairseq_cli.TOOL`` as ``fairseq-TOOL`` runs it."""
    tool, *args = argv
    lean_fairseq()
    sys.argv = [f"fairseq-{tool}", *args]
    importlib.import_module(f"fairseq_cli.{tool}").cli_main()


#: fairseq-generate's per-sentence output (S-12, H-12, ...): returned, never logged
GEN_OUTPUT_RE = re.compile(r"^[STHDPWE]-\d+\t")


def run_fairseq(cmd: Sequence[str], env: Mapping[str, str] | None, logfile: Path, what: str,
                timeout_s: float | None = None, error: type[MarginmineError] = MarginmineError,
                prefix: str = "") -> tuple[list[str], bool]:
    """Run a fairseq command; stream its output to our logger and append it to ``logfile``.

    Translation output lines (``H-12<TAB>...``) are returned but neither logged nor written to
    ``logfile``. Returns ``(lines, killed)``: ``killed`` when it was terminated for exceeding
    ``timeout_s``. A non-zero exit (otherwise) raises ``error`` with ``prefix + what`` and the
    last lines.
    """
    log.info("%s%s: %s", prefix, what, " ".join(cmd))
    lines: list[str] = []
    killed = threading.Event()
    logfile.parent.mkdir(parents=True, exist_ok=True)
    with open(logfile, "a", encoding="utf-8") as lf:
        lf.write(f"\n# {time.strftime('%Y-%m-%d %H:%M:%S')} {' '.join(cmd)}\n")
        proc = subprocess.Popen(list(cmd), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                env=dict(env) if env is not None else None,
                                text=True, encoding="utf-8", errors="replace", bufsize=1)
        assert proc.stdout is not None

        def stop() -> None:
            if proc.poll() is None:
                log.warning("%s%s exceeded its wall-clock budget (%.0f s); terminating it", prefix, what, timeout_s)
                killed.set()
                proc.terminate()

        timer = threading.Timer(timeout_s, stop) if timeout_s is not None else None
        if timer is not None:
            timer.daemon = True
            timer.start()
        previous: Any = None
        main_thread = threading.current_thread() is threading.main_thread()
        if main_thread:
            def on_sigterm(signum: int, frame: object) -> None:  # a killed job must not orphan fairseq
                raise SystemExit(128 + signum)

            previous = signal.signal(signal.SIGTERM, on_sigterm)
        try:
            for line in proc.stdout:
                line = line.rstrip("\n")
                lines.append(line)
                if GEN_OUTPUT_RE.match(line):
                    continue
                lf.write(line + "\n")
                log.info("%s: %s", what, line)
        except BaseException:
            proc.kill()
            raise
        finally:
            rc = proc.wait()
            if timer is not None:
                timer.cancel()
            if main_thread:
                signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)
    if rc != 0 and not killed.is_set():
        tail = "\n".join(x for x in lines[-25:] if not GEN_OUTPUT_RE.match(x))
        raise error(f"{prefix}{what} failed (exit code {rc}); full log in {logfile}; last lines:\n{tail}")
    return lines, killed.is_set()


#: fairseq start-up plus the work after training (averaging, export), not counted by --stop-time-hours
STARTUP_RESERVE_S = 30.0


def time_budget(deadline: float | None, has_checkpoint: bool, train_seconds: float, max_minutes: float | None,
                what: str, error: type[MarginmineError]) -> tuple[list[str], float | None]:
    """The ``--stop-time-hours`` arguments and the hard timeout of one fairseq-train call that must
    end by ``deadline`` (``time.monotonic()``; None: no budget). fairseq compares its CUMULATIVE
    training time (kept in the checkpoint) with the limit, so ``train_seconds`` of earlier calls is
    added. A budget used up before the first checkpoint is an error (nothing would be trained)."""
    if deadline is None:
        return [], None
    remaining = deadline - time.monotonic() - STARTUP_RESERVE_S
    if remaining <= 0 and not has_checkpoint:
        raise error(f"{what}: the wall-clock budget ({max_minutes} min) was used up by BPE and binarization; "
                    "nothing trained (raise max_minutes; rerunning resumes)")
    remaining = max(remaining, 1.0)
    hours = (float(train_seconds) + remaining) / 3600.0
    return ["--stop-time-hours", f"{hours:.6f}"], remaining + max(120.0, 0.1 * remaining)  # hard stop on overshoot


def log_value(v: str) -> Any:
    """A value of a fairseq log field: int, float, or the text as it is."""
    try:
        f = float(v)
    except ValueError:
        return v
    return int(f) if f.is_integer() and "." not in v else f


_LOADED_RE = re.compile(r"Loaded checkpoint \S+ \(epoch (\d+) @ (\d+) updates\)")
_SAVED_RE = re.compile(r"Saved checkpoint (\S+) \(epoch (\d+) @ (\d+) updates")
_STATS_RE = re.compile(r"\| (train|valid) \| epoch (\d+) \| (.*)$")
_INNER_RE = re.compile(r"\| train_inner \| epoch (\d+):\s+\d+ / \d+ (.*)$")


def parse_train_log(lines: Sequence[str]) -> dict[str, Any]:
    """Stats from fairseq-train's ``--log-format simple`` output: resume point, per-epoch train and
    valid stats, the last checkpoint saved, how it stopped."""
    out: dict[str, Any] = {"resumed_from": None, "epoch": None, "num_updates": None, "train": [], "valid": [],
                           "wps": [], "inner_loss": [], "stopped_by_time": False, "early_stop": False,
                           "last_saved": None}
    for line in lines:
        m = _LOADED_RE.search(line)
        if m:
            # fairseq names the epoch it continues with (the next one after an end-of-epoch save)
            out["resumed_from"] = {"continues_epoch": int(m.group(1)), "num_updates": int(m.group(2))}
            out["num_updates"] = int(m.group(2))
            continue
        m = _SAVED_RE.search(line)
        if m:  # fairseq names the first file it wrote: checkpoint<E>.pt only at the end of an epoch
            out["last_saved"] = {"file": Path(m.group(1)).name, "epoch": int(m.group(2)),
                                 "num_updates": int(m.group(3))}
            continue
        m = _STATS_RE.search(line)
        if m:
            stats: dict[str, Any] = {"epoch": int(m.group(2))}
            for field in m.group(3).split(" | "):
                k, _, v = field.strip().partition(" ")
                if k and k != "valid":  # "valid on 'valid' subset"
                    stats[k] = log_value(v.strip())
            out[m.group(1)].append(stats)
            if m.group(1) == "train":
                out["epoch"] = stats["epoch"]
            if "num_updates" in stats:
                out["num_updates"] = stats["num_updates"]
            continue
        m = _INNER_RE.search(line)
        if m:
            kv = dict(x.split("=", 1) for x in m.group(2).split(", ") if "=" in x)
            if "wps" in kv:
                out["wps"].append(float(kv["wps"]))
            if "loss" in kv and "num_updates" in kv:  # the training curve, one point per log interval
                out["inner_loss"].append((int(kv["num_updates"]), float(kv["loss"])))
            continue
        if "Stopping training due to cumulative_training_time" in line:
            out["stopped_by_time"] = True
        elif "early stop since valid performance hasn't improved" in line:
            out["early_stop"] = True
    return out


if __name__ == "__main__":
    _main(sys.argv[1:])
