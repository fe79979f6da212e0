#!/usr/bin/env bash
# Clear a stale Snakemake lock: after a kill (SIGKILL, a lost SSH session, an OOM kill) Snakemake
# leaves .snakemake/locks behind and the next run stops at LockException until `--unlock`.
# The lock is removed only when no snakemake process runs in this directory; otherwise it is
# kept and the run that follows reports the lock as usual.
#   usage: scripts/unlock_stale.sh [WORKFLOW_DIR]     (default: the current directory)
set -euo pipefail
dir=$(realpath "${1:-.}")
locks="$dir/.snakemake/locks"
[ -d "$locks" ] && [ -n "$(ls -A "$locks")" ] || exit 0
if [ ! -d /proc/self ]; then
  echo "unlock_stale: no /proc here; if no snakemake runs in $dir, run: snakemake --unlock" >&2
  exit 0
fi
for p in /proc/[0-9]*; do
  pid=${p#/proc/}
  [ "$pid" = "$$" ] && continue
  cmd=$(tr '\0' ' ' < "$p/cmdline" 2> /dev/null) || continue
  case "$cmd" in *bin/snakemake*|*"-m snakemake"*|snakemake\ *) ;; *) continue ;; esac
  cwd=$(readlink "$p/cwd" 2> /dev/null) || continue
  if [ "$cwd" = "$dir" ]; then
    echo "unlock_stale: snakemake (pid $pid) runs in $dir; its lock is kept" >&2
    exit 0
  fi
done
echo "unlock_stale: removing a stale Snakemake lock in $dir (no snakemake process runs there)" >&2
rm -f "$locks"/*
