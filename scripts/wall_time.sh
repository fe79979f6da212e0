#!/usr/bin/env bash
# Run a command and append its wall time to a TSV, one row per invocation: a part stopped in one
# session and continued in the next has two rows, whose sum is its time without the gap between.
#   usage: scripts/wall_time.sh TSV PART COMMAND [ARG...]
# Columns: part, started and ended (UTC), seconds, exit status, machine (marginmine.machine; timings
# differ between CPU models). The row is written however the command ends, a SIGTERM, SIGHUP or
# Ctrl-C included; only a SIGKILL of this script loses it (the command's own logs keep their times).
# The exit status is the command's.
set -uo pipefail
[ $# -ge 3 ] || { echo "usage: scripts/wall_time.sh TSV PART COMMAND [ARG...]" >&2; exit 2; }
tsv=$1 part=$2
shift 2
mkdir -p "$(dirname "$tsv")"
[ -s "$tsv" ] || printf 'part\tstarted\tended\tseconds\texit\tmachine\n' > "$tsv"
start=$(date -u +%s)
rc=
record() {
  local end machine
  end=$(date -u +%s)
  machine=$(python -c 'from marginmine.machine import machine; print(machine())' 2> /dev/null) || machine=unknown
  printf '%s\t%s\t%s\t%d\t%s\t%s\n' "$part" "$(date -u -d "@$start" +%FT%TZ)" "$(date -u -d "@$end" +%FT%TZ)" \
    $((end - start)) "${rc:-killed}" "$machine" >> "$tsv"
}
# the command runs in the foreground (a Ctrl-C reaches it as usual); a signal sent to this script
# alone is acted on when the command has ended
trap 'rc=130; record; trap - EXIT; exit 130' INT
trap 'rc=143; record; trap - EXIT; exit 143' TERM
trap 'rc=129; record; trap - EXIT; exit 129' HUP
trap 'record' EXIT
"$@"
rc=$?
exit $rc
