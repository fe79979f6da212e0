#!/usr/bin/env bash
# Run a command and append its wall time to a TSV, one row per invocation: a part stopped in one
# session and continued in the next has two rows, whose sum is its time without the gap between.
#   usage: scripts/wall_time.sh TSV PART COMMAND [ARG...]
# Columns: part, started and ended (UTC), seconds, exit status, machine (marginmine.machine, from PATH
# or else the project's .venv; timings differ between CPU models). The exit status, the row's and
# the script's, is the command's. After each row, TSV with .tsv replaced by .md (or .md appended)
# holds each part's sum (`marginmine wall-times`); if that fails, the .md is removed rather than
# left without the newest row.
#
# Signals: the command stays in this script's process group, so a Ctrl-C or a signal to the group
# (kill -- -PGID, SIGKILL included) reaches it as before; a SIGTERM or SIGHUP sent to this script
# alone (`kill` of make, whose child this script is) is passed on to the command. The row is written
# when the command has ended, however it ended; only a SIGKILL of this script loses it (the
# command's own logs keep their times).
set -uo pipefail
[ $# -ge 3 ] || { echo "usage: scripts/wall_time.sh TSV PART COMMAND [ARG...]" >&2; exit 2; }
tsv=$1 part=$2
shift 2
mkdir -p "$(dirname "$tsv")"
[ -s "$tsv" ] || printf 'part\tstarted\tended\tseconds\texit\tmachine\n' > "$tsv"
start=$(date -u +%s)

# a background command of a script ignores SIGINT; GNU env gives it back, so a Ctrl-C stops the
# command itself. Without it (BSD env) a SIGINT here asks the command to stop with SIGTERM.
if env --default-signal=INT true 2> /dev/null; then
  launch=(env --default-signal=INT)
  on_int=:
else
  launch=()
  on_int='kill -s TERM "$child" 2> /dev/null'
fi
"${launch[@]}" "$@" &
child=$!
trap "$on_int" INT
trap 'kill -s TERM "$child" 2> /dev/null' TERM
trap 'kill -s HUP "$child" 2> /dev/null' HUP

rc=
while [ -z "$rc" ]; do
  wait "$child"
  status=$?
  kill -0 "$child" 2> /dev/null && continue  # a trapped signal ended the wait: the command runs on
  if [ "$status" -gt 128 ]; then  # the command's own status, if bash still holds it (bash 5.2 may
    wait "$child" 2> /dev/null    # answer -1, older ones 127: then the signal's status stands)
    again=$?
    if [ "$again" -ge 0 ] && [ "$again" -le 255 ] && [ "$again" -ne 127 ]; then status=$again; fi
  fi
  rc=$status
done
end=$(date -u +%s)
# the machine and the summary come from marginmine: the one on PATH (make puts its .venv first), else
# the project's .venv beside this script, so a row run outside make names its machine (the command
# has ended: the PATH below is only the two calls')
command -v marginmine > /dev/null \
  || PATH="$(CDPATH='' cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." > /dev/null && pwd)/.venv/bin:$PATH"
machine=$(python -c 'from marginmine.machine import machine; print(machine())' 2> /dev/null) || machine=unknown
printf '%s\t%s\t%s\t%d\t%s\t%s\n' "$part" "$(date -u -d "@$start" +%FT%TZ)" "$(date -u -d "@$end" +%FT%TZ)" \
  $((end - start)) "$rc" "$machine" >> "$tsv"
# each part's time, the sum of its rows, next to them (marginmine wall-times); the row is kept either way
md="${tsv%.tsv}.md"
if ! marginmine wall-times "$tsv" --md "$md"; then
  rm -f "$md"
  echo "scripts/wall_time.sh: $tsv not summarised; $md removed (the row is in $tsv)" >&2
fi
exit "$rc"
