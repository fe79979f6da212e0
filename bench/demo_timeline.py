"""Where a workflow run's time went, from the run's own Snakemake log (``.snakemake/log/*.log``):
per rule the jobs, the summed job seconds and the first start and last end (minutes after the run
began), plus the run's wall time. Jobs that overlap (two 1-thread jobs side by side) count in full
for each, so the summed seconds exceed the wall time; divided by the cores they are the wall time
of perfectly packed cores, a lower bound for any schedule of 1-thread jobs (dependencies ignored).
A job still running when a log ends (a stopped run) never finished there and is not counted.

A run stopped and continued is several logs, given in the order they ran: their tables are summed,
the minutes of each later log counted from the end of the one before (the gap between them left out).

    .venv/bin/python bench/demo_timeline.py .snakemake/log/<run>.snakemake.log [LOG ...] \\
        [--cores 2] [--out bench/out/demo_timeline]
Writes <out>.json and <out>.md.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from datetime import datetime
from pathlib import Path

_STAMP = re.compile(r"^\[(\w{3} \w{3} +\d+ \d\d:\d\d:\d\d \d{4})\]$")
_START = re.compile(r"^(?:local)?rule (\w+):$")
_JOBID = re.compile(r"^\s+jobid: (\d+)$")
_DONE = re.compile(r"^Finished jobid: (\d+) \(Rule: (\w+)\)$")


def parse(log: Path) -> tuple[dict[int, tuple[str, datetime, datetime]], datetime, datetime]:
    stamp = None
    pending: tuple[str, datetime] | None = None
    started: dict[int, tuple[str, datetime]] = {}
    jobs: dict[int, tuple[str, datetime, datetime]] = {}
    first = last = None
    for line in log.read_text(encoding="utf-8").splitlines():
        if m := _STAMP.match(line):
            stamp = datetime.strptime(m.group(1), "%a %b %d %H:%M:%S %Y")
            first = first or stamp
            last = stamp
        elif (m := _START.match(line)) and stamp is not None:
            pending = (m.group(1), stamp)
        elif (m := _JOBID.match(line)) and pending is not None:
            started[int(m.group(1))] = pending
            pending = None
        elif (m := _DONE.match(line)) and stamp is not None:
            jid = int(m.group(1))
            if jid in started:
                jobs[jid] = (started[jid][0], started[jid][1], stamp)
    if first is None or last is None:
        raise SystemExit(f"{log}: no timestamps (not a Snakemake run log?)")
    return jobs, first, last


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("logs", nargs="+", metavar="log", help="Snakemake run logs, in the order they ran")
    ap.add_argument("--cores", type=int, default=2, help="the cores the run had (for the packed time)")
    ap.add_argument("--out", default="bench/out/demo_timeline")
    args = ap.parse_args()
    if args.cores < 1:
        ap.error("--cores must be at least 1")
    rules: dict[str, dict] = {}
    walls: list[float] = []
    for log in args.logs:
        jobs, t0, t1 = parse(Path(log))
        offset = sum(walls)
        for rule, s, e in jobs.values():
            r = rules.setdefault(rule, {"jobs": 0, "job_seconds": 0.0, "first_start_min": None, "last_end_min": None})
            r["jobs"] += 1
            r["job_seconds"] += (e - s).total_seconds()
            a, b = offset + (s - t0).total_seconds() / 60, offset + (e - t0).total_seconds() / 60
            r["first_start_min"] = a if r["first_start_min"] is None else min(r["first_start_min"], a)
            r["last_end_min"] = b if r["last_end_min"] is None else max(r["last_end_min"], b)
        walls.append((t1 - t0).total_seconds() / 60)
    job_seconds = sum(r["job_seconds"] for r in rules.values())
    res = {"logs": args.logs, "wall_minutes": round(sum(walls), 2),
           "wall_minutes_per_log": [round(w, 2) for w in walls],
           "job_seconds": round(job_seconds), "cores": args.cores,
           "packed_minutes": round(job_seconds / 60 / args.cores, 2), "rules": rules}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(res, indent=1) + "\n")
    per_log = "" if len(walls) == 1 else " over " + " + ".join(f"{w:.1f}" for w in walls) + " (one per log)"
    md = [f"# Run timeline: {', '.join(args.logs)}", "",
          f"Wall time {res['wall_minutes']:.1f} min{per_log} (first to last log stamp). Jobs: {res['job_seconds']} "
          f"job-seconds = {res['packed_minutes']:.1f} min of {args.cores} perfectly packed cores.", "",
          "| rule | jobs | job s (summed) | from min | to min |", "|---|---:|---:|---:|---:|"]
    for rule, r in sorted(rules.items(), key=lambda kv: kv[1]["first_start_min"]):
        md.append(f"| {rule} | {r['jobs']} | {r['job_seconds']:.0f} | {r['first_start_min']:.1f} | "
                  f"{r['last_end_min']:.1f} |")
    out.with_suffix(".md").write_text("\n".join(md) + "\n")
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    sys.exit(main())
