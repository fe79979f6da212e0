"""The smoke experiment (config/test.yaml) as the tests run it: its command, one session-wide run
(the ``smoke`` fixture in conftest.py) and the outputs a rerun must reproduce byte for byte."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import yaml

from marginmine.defaults import K as DEFAULT_K
from test_workflow import ALL_CORES, CORES, REPO, SNAKEMAKE, copy_workflow, snakemake

TARGETS = ("all", "preprocess", "encoders", "scoring", "report_figures", "results/test/comparison.tsv")
SHARDS = ("0000", "0001")
SCORING = yaml.safe_load((REPO / "config" / "test.yaml").read_text())["scoring"]
K = SCORING.get("k", DEFAULT_K)  # config/test.yaml keeps the schema's default


def smoke_command(real_data: Path, *config: str, overlay: str | None = None,
                  targets: tuple[str, ...] = TARGETS, cores: str = CORES) -> list[str]:
    """The smoke experiment's snakemake arguments; ``config`` adds ``key=value`` overrides, ``overlay``
    a second config file merged over config/test.yaml (nested values keep their YAML types there;
    ``--config nmt={seeds: [1]}`` would give the string '1'); ``cores`` the worker's share unless
    given (the smoke run and the suite get every core: test_workflow.ALL_CORES)."""
    files = ["config/test.yaml", *([overlay] if overlay else [])]
    return [*targets, "--configfile", *files, "--cores", cores, "--config", f"data_dir={real_data}", *config]


def run_smoke(d: Path, real_data: Path, timeout: float = 1500) -> subprocess.CompletedProcess[str]:
    return snakemake(*smoke_command(real_data, cores=ALL_CORES), cwd=d, timeout=timeout)


def smoke_run(d: Path, real_data: Path) -> Path:
    """The workflow copied into ``d`` and the smoke experiment run there to the end."""
    copy_workflow(d)
    r = run_smoke(d, real_data)
    assert r.returncode == 0, (r.stdout + r.stderr)[-4000:]
    return d


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


#: the smoke experiment's NMT systems (config/test.yaml: ratio on seeds 1 and 2, random on seed 1)
SYSTEMS = (("ratio", 1), ("ratio", 2), ("random", 1))


def model_digest(checkpoint: Path) -> str:
    """SHA-256 over an NMT checkpoint's parameters (names, dtypes, shapes, bytes): the model itself
    (the file also holds the training's wall times, which differ between runs)."""
    import torch

    state = torch.load(checkpoint, map_location="cpu", weights_only=False)["model"]  # our own test output
    h = hashlib.sha256()
    for name in sorted(state):
        t = state[name].contiguous()
        h.update(f"{name}:{t.dtype}:{tuple(t.shape)}".encode())
        h.update(t.numpy().tobytes())
    return h.hexdigest()


def final_outputs(d: Path, systems: tuple[tuple[str, int], ...] = SYSTEMS, decoded: bool = True) -> dict[str, str]:
    """SHA-256 of every output a rerun must reproduce byte for byte (BLEU by its numbers), for the
    NMT ``systems`` (method, seed) run (the method-set tables only when both smoke methods ran).
    ``decoded=False``: the systems were trained, not evaluated - their models' parameters instead."""
    out = {}
    methods = sorted({m for m, _ in systems})
    patterns = ["work/test/score/*/*.scores.tsv.gz", "work/test/embed/*/*.npy", "results/test/preprocess/ledger.json",
                "results/test/preprocess/ledger.tsv", "work/test/preprocess/kept/*.tsv.gz",
                "results/test/encoder/model.pt", "work/test/corpus/heldout.*"]
    patterns += [f"work/test/select/{m}.2k.tsv.gz" for m in methods]
    for m, s in systems:
        out[f"work/test/nmt/{m}.2k/seed{s}/checkpoint_avg.pt (parameters)"] = model_digest(
            d / f"work/test/nmt/{m}.2k/seed{s}/checkpoint_avg.pt")
    if decoded:
        patterns += [f"results/test/nmt/{m}.2k/seed{s}/bleu.hyp/*.de" for m, s in systems]  # every hypothesis
    if set(methods) == {"ratio", "random"}:
        patterns += ["results/test/select/composition.tsv", "results/test/select/density.tsv"]
    for pattern in patterns:
        for p in sorted(d.glob(pattern)):
            out[str(p.relative_to(d))] = sha256(p)
    if not decoded:
        return out
    numbers = ("bleu", "tok_bleu", "precisions", "hyp_len", "ref_len", "lines")  # not seconds, not paths
    for m, s in systems:
        p = d / f"results/test/nmt/{m}.2k/seed{s}/bleu.json"
        b = json.loads(p.read_text())
        sets = {"test": b["test"], "dev": b["dev"], **b["extra"]}
        out[str(p.relative_to(d))] = json.dumps({k: {x: v[x] for x in numbers} for k, v in sets.items()})
    rows = [r.split("\t") for r in (d / "results/test/comparison_runs.tsv").read_text().splitlines()]
    keep = [i for i, h in enumerate(rows[0]) if h != "train_s"]  # wall time differs between runs
    out["comparison_runs (all but train_s)"] = "\n".join(
        "\t".join(r[i] for i in keep) for r in rows if r[0] == "method" or (r[0], int(r[2])) in systems)
    return out


# --- killing the smoke experiment by process group (tests/test_smoke_kill.py) ----------------


def group_commands(pgid: int) -> list[str]:
    """Command lines of the live processes in process group ``pgid``."""
    out = []
    for p in Path("/proc").glob("[0-9]*"):
        try:
            if os.getpgid(int(p.name)) != pgid:
                continue
            if (p / "stat").read_text().rpartition(")")[2].split()[0] == "Z":
                continue  # dead, waiting for its parent (init) to reap it
            out.append((p / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"))
        except (OSError, ProcessLookupError, IndexError):
            continue
    return out


#: what encoder training and every later step write (Snakemake reruns a producer only when some
#: target needs its output, so all of it goes)
DOWNSTREAM_OF_THE_ENCODER = ("results/test/encoder", "work/test/encoders", "results/test/encoders", "work/test/embed",
                             "work/test/score", "work/test/select", "results/test/select", "results/test/mining",
                             "results/test/filtering", "work/test/nmt", "results/test/nmt", "results/test/report",
                             "results/test/comparison.*", "results/test/bleu_2k.*")

#: the killed run trains one NMT system (the ratio selection's) to keep the suite within its time;
#: everything it writes is compared with the uninterrupted two-system run
ONE_SYSTEM = "one_system.yaml"
ONE_SYSTEM_YAML = "selection: {sizes: [2k], methods: [ratio]}\npublished: {baselines: [ratio]}\nnmt: {seeds: [1]}\n"
#: ... and builds only what the long, killable steps (encoder training, embedding, NMT training)
#: feed, up to the trained model (the evaluations and tables are deterministic functions of those
#: outputs; decoding and rebuilding them would test no crash safety and cost the suite's time: the
#: model is compared by its parameters)
KILLED_TARGETS = ("work/test/nmt/ratio.2k/seed1/checkpoint_avg.pt",)


def run_until(d: Path, real_data: Path, log: Path, moment: Callable[[list[str]], bool] | None,
              timeout: float = 1500) -> str:
    """The README's rerun (clear a stale lock, then the same snakemake command) in ``d``; with
    ``moment``, SIGKILL its whole process group when ``moment(commands of the group)`` holds.
    Returns 'killed' or 'finished'."""
    subprocess.run(["bash", str(REPO / "scripts/unlock_stale.sh"), str(d)], check=True)
    (d / ONE_SYSTEM).write_text(ONE_SYSTEM_YAML)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    with open(log, "a") as fh:
        command = [SNAKEMAKE, *smoke_command(real_data, overlay=ONE_SYSTEM, targets=KILLED_TARGETS)]
        proc = subprocess.Popen(command, cwd=d, env=env, stdout=fh,
                                stderr=subprocess.STDOUT, start_new_session=True)
        t0 = time.monotonic()
        try:
            while proc.poll() is None:
                if moment is not None and moment(group_commands(proc.pid)):
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
                    for _ in range(100):  # SIGKILL is delivered asynchronously
                        if not group_commands(proc.pid):
                            break
                        time.sleep(0.05)
                    assert not group_commands(proc.pid), "a process of the killed group survived"
                    return "killed"
                if time.monotonic() - t0 > timeout:
                    raise TimeoutError(f"smoke run in {d} took more than {timeout} s")
                time.sleep(0.05)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 0, log.read_text()[-4000:]
    return "finished"


def running_for(name: str, seconds: float) -> Callable[[list[str]], bool]:
    """A moment: a ``marginmine <name>`` job has been running for ``seconds``."""
    seen: dict[str, float] = {}

    def moment(commands: list[str]) -> bool:
        if any(f"marginmine {name} " in c for c in commands):
            seen.setdefault(name, time.monotonic())
            return time.monotonic() - seen[name] >= seconds
        return False
    return moment


def nmt_checkpoint_exists(d: Path) -> Callable[[list[str]], bool]:
    """A moment: an NMT system is training and has saved a checkpoint (so the rerun resumes)."""
    def moment(commands: list[str]) -> bool:
        return (any("marginmine train-nmt " in c for c in commands)
                and any(d.glob("work/test/nmt/*/seed*/checkpoints/checkpoint_last.pt")))
    return moment
