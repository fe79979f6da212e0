"""A scoring job killed with SIGKILL part-way and run again (issue 32): what it loses, and whether its
score file equals an uninterrupted run's.

Runs ``--command`` (a ``marginmine score`` command line writing ``--output``) in a process group of
its own, watches the finished query blocks its kNN searches keep in ``<output>.knn/`` and, once
``--kill-after`` blocks exist (counted over both sides' searches), sends SIGKILL to the group. Then
runs the same command again to the end and compares the score file with ``--reference`` (the
uninterrupted run's) by SHA-256. The work lost is the two runs' wall time minus ``--reference-wall``
(the uninterrupted run's, e.g. from the workflow's benchmark file).

    .venv/bin/python bench/bench_resume.py --output work/resume/shard0000.scores.tsv.gz \\
        --reference work/scale/score/dan/shard0000.scores.tsv.gz --reference-wall 1300 \\
        --kill-after 16 --command "marginmine score --input ... --output work/resume/shard0000.scores.tsv.gz"

Writes bench/out/resume.json and bench/out/resume.md.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def blocks(knn_dir: Path) -> list[Path]:
    return sorted(knn_dir.glob("batch*/*/q*.npz")) if knn_dir.exists() else []


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--command", required=True, help="the scoring command (shell), writing --output")
    ap.add_argument("--output", required=True, help="the score file the command writes")
    ap.add_argument("--reference", required=True, help="the uninterrupted run's score file")
    ap.add_argument("--reference-wall", type=float, required=True, help="the uninterrupted run's wall seconds")
    ap.add_argument("--kill-after", type=int, required=True, help="finished query blocks before SIGKILL")
    ap.add_argument("--log", default="bench/out/resume.log")
    ap.add_argument("--out", default=str(REPO / "bench/out"))
    args = ap.parse_args()

    from marginmine.machine import machine as describe_machine

    output = Path(args.output)
    knn_dir = output.with_name(output.name + ".knn")
    leftovers = [p for p in (output, knn_dir, output.with_name(output.name + ".part"),
                             output.with_name(output.name + ".state.json")) if p.exists()]
    if leftovers:
        raise SystemExit(f"{', '.join(map(str, leftovers))} exist(s): remove them to start from nothing")
    Path(args.log).parent.mkdir(parents=True, exist_ok=True)
    log = open(args.log, "a")
    t0 = time.monotonic()
    proc = subprocess.Popen(args.command, shell=True, start_new_session=True, stdout=log, stderr=log)
    while proc.poll() is None and len(blocks(knn_dir)) < args.kill_after:
        time.sleep(1)
    if proc.poll() is not None:
        raise SystemExit(f"the command ended (exit {proc.returncode}) before {args.kill_after} blocks were kept")
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    killed_at = time.monotonic() - t0
    kept = [str(p.relative_to(knn_dir)) for p in blocks(knn_dir)]
    print(f"SIGKILL after {killed_at:.0f} s with {len(kept)} finished blocks kept", flush=True)
    t1 = time.monotonic()
    rc = subprocess.run(args.command, shell=True, stdout=log, stderr=log).returncode
    resumed = time.monotonic() - t1
    if rc != 0:
        raise SystemExit(f"the resumed run failed (exit {rc}); see {args.log}")
    same = sha256(output) == sha256(Path(args.reference))
    report = {"machine": describe_machine(), "command": args.command, "killed_after_s": round(killed_at),
              "blocks_kept": len(kept), "kept": kept, "resumed_s": round(resumed),
              "reference_s": round(args.reference_wall),
              "lost_s": round(killed_at + resumed - args.reference_wall),
              "sha256": sha256(output), "reference_sha256": sha256(Path(args.reference)), "identical": same}
    out = Path(args.out)
    (out / "resume.json").write_text(json.dumps(report, indent=1) + "\n")
    (out / "resume.md").write_text(
        "# A scoring job killed with SIGKILL and run again (bench/bench_resume.py)\n\n"
        f"Machine: {report['machine']}. `{args.output}`: killed after {report['killed_after_s']} s with "
        f"{report['blocks_kept']} finished query blocks kept; the second run took {report['resumed_s']} s; the "
        f"uninterrupted run {report['reference_s']} s: **{report['lost_s']} s of work lost**. Score file "
        f"SHA-256 `{report['sha256']}`, the uninterrupted run's `{report['reference_sha256']}`: "
        f"**{'identical' if same else 'DIFFERENT'}**.\n")
    print(json.dumps({k: v for k, v in report.items() if k != "kept"}, indent=1))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
