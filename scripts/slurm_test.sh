#!/usr/bin/env bash
# A real SLURM test of the workflow (issue #6): a single-node SLURM (scripts/slurm_cluster.sh),
# then `snakemake preprocess --configfile config/test.yaml --profile profiles/slurm` in a
# throw-away copy of the workflow, then proof from SLURM's accounting (`sacct`) that every job
# of the plan ran as a SLURM job of the profile's partition and account and COMPLETED.
#
#   bash scripts/slurm_test.sh            (make slurm-test)   root, Debian 12, 2 cores
#
# The cluster's partition and account are read from profiles/default/config.yaml (the workflow
# profile both SLURM profiles take them from).
# Environment: KEEP_SLURM=1 leaves the cluster up (otherwise it is stopped at exit, unless it was
# already up before the test); SLURM_TEST_DIR (default /tmp/mm-slurm-run, deleted and recreated);
# SLURM_TEST_TARGET (default preprocess); SLURM_TEST_TIMEOUT (s, default 1200: snakemake is
# killed after that); MARGINMINE_DATA_DIR (default ../shared/data of the repository).
# Exit status 0 only when every check passed.
set -euo pipefail

say() { printf '[slurm_test %s] %s\n' "$(date +%T)" "$*" >&2; }
fail() { say "FAIL: $*"; exit 1; }

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CLUSTER="$REPO/scripts/slurm_cluster.sh"
RUN_DIR=${SLURM_TEST_DIR:-/tmp/mm-slurm-run}
TARGET=${SLURM_TEST_TARGET:-preprocess}
CONFIGFILE=config/test.yaml
TIMEOUT=${SLURM_TEST_TIMEOUT:-1200}
export PATH="$REPO/.venv/bin:$PATH"
# the cluster gets the partition and account the profile submits to
read -r PARTITION ACCOUNT < <(python -c 'import sys, yaml
r = yaml.safe_load(open(sys.argv[1]))["default-resources"]
print(r["slurm_partition"], r["slurm_account"])' "$REPO/profiles/default/config.yaml") || true
[[ -n $ACCOUNT ]] || fail "no default-resources slurm_partition/slurm_account in profiles/default (the workflow profile)"
export SLURM_PARTITION=$PARTITION SLURM_ACCOUNT=$ACCOUNT
if [[ -z ${MARGINMINE_DATA_DIR:-} && -d $REPO/../shared/data ]]; then
  MARGINMINE_DATA_DIR=$(cd "$REPO/../shared/data" && pwd)
fi
export MARGINMINE_DATA_DIR=${MARGINMINE_DATA_DIR:-}

T0=$SECONDS
[[ $(id -u) == 0 ]] || fail "needs root (installs and starts SLURM)"
[[ -x $REPO/.venv/bin/snakemake ]] || fail "no $REPO/.venv/bin/snakemake: run make setup first"
[[ -n $MARGINMINE_DATA_DIR && -d $MARGINMINE_DATA_DIR ]] ||
  fail "data directory not found: set MARGINMINE_DATA_DIR"
[[ $RUN_DIR != "$REPO" && $RUN_DIR != / ]] || fail "SLURM_TEST_DIR must be a throw-away directory"

# --- the cluster: torn down at exit unless KEEP_SLURM=1 or it was up before we came ---------
STARTED_CLUSTER=0
SMK_PID=
cleanup() {
  local rc=$? i
  if [[ -n $SMK_PID ]] && kill -0 "$SMK_PID" 2>/dev/null; then # interrupted: stop snakemake
    say "stopping snakemake (timeout pid $SMK_PID)"
    kill -TERM "$SMK_PID" 2>/dev/null || true
    for ((i = 0; i < 30; i++)); do kill -0 "$SMK_PID" 2>/dev/null || break; sleep 1; done
    kill -KILL -- "-$SMK_PID" 2>/dev/null || true
  fi
  if [[ ${KEEP_SLURM:-0} == 1 ]]; then
    say "KEEP_SLURM=1: cluster left up ($(bash "$CLUSTER" env)); stop it with: bash scripts/slurm_cluster.sh down"
  elif ((STARTED_CLUSTER)); then
    bash "$CLUSTER" down || rc=1
  else
    say "the cluster was already up before this test: left up"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if bash "$CLUSTER" status >/dev/null 2>&1; then
  say "cluster already up"
  UP_SECONDS=0
else
  STARTED_CLUSTER=1
  t=$SECONDS
  timeout -k 10 600 bash "$CLUSTER" up || fail "slurm_cluster.sh up failed"
  UP_SECONDS=$((SECONDS - t))
fi
eval "$(bash "$CLUSTER" env)" # SLURM_CONF for sbatch/sacct/squeue (exported to the jobs too)

# --- a throw-away copy of the workflow (never run snakemake in the repository itself) -------
# the marginmine package itself comes from .venv (installed editable from $REPO/src)
rm -rf "$RUN_DIR"
mkdir -p "$RUN_DIR"
for item in Snakefile rules config envs docs profiles config.yaml; do
  cp -r "$REPO/$item" "$RUN_DIR/"
done
cd "$RUN_DIR"
SMK=(snakemake "$TARGET" --configfile "$CONFIGFILE" --profile profiles/slurm)

# --- the plan: which jobs must reach SLURM (rules without shell/run run locally) -------------
timeout -k 10 300 "${SMK[@]}" -n -p >plan.log 2>&1 || { cat plan.log >&2; fail "dry run failed"; }
awk '
  function flush() { if (name != "" && !local) print name }
  /^(local)?rule [^ ]+:$/ { flush(); name = $2; sub(/:$/, "", name); local = ($1 == "localrule") }
  /^Shell command: None$/ { local = 1 }
  END { flush() }' plan.log | sort >expected_rules.txt
N_EXPECTED=$(wc -l <expected_rules.txt)
((N_EXPECTED > 1)) || fail "the plan has $N_EXPECTED SLURM job(s); a multi-job slice was expected"
say "plan: $N_EXPECTED SLURM jobs: $(uniq -c expected_rules.txt | awk '{printf "%s x%s  ", $2, $1}')"

# --- the run ---------------------------------------------------------------------------------
START=$(date +%Y-%m-%dT%H:%M:%S)
t=$SECONDS
# snakemake waits for ever on a job SLURM can never start (or a broken status command) and
# may ignore SIGTERM: `timeout` kills it. In the background, so that a signal to this script
# reaches cleanup at once (timeout runs in its own process group).
timeout -k 30 "$TIMEOUT" "${SMK[@]}" --slurm-init-seconds-before-status-checks 5 \
  --slurm-keep-successful-logs >snakemake.log 2>&1 &
SMK_PID=$!
wait "$SMK_PID" && SMK_RC=0 || SMK_RC=$?
SMK_PID=
RUN_SECONDS=$((SECONDS - t))
RUN_ID=$(sed -n 's/.*SLURM run ID: \([A-Za-z0-9_-]*\).*/\1/p' snakemake.log | head -n 1)
if ((SMK_RC != 0)); then
  tail -n 60 snakemake.log >&2
  [[ -z $RUN_ID ]] || scancel --name "$RUN_ID" 2>/dev/null || true
  ((SMK_RC == 124 || SMK_RC == 137)) && fail "snakemake did not finish within ${TIMEOUT} s (killed)"
  fail "snakemake exited with $SMK_RC (log: $RUN_DIR/snakemake.log)"
fi
[[ -n $RUN_ID ]] || fail "no 'SLURM run ID' in snakemake.log: did the slurm executor run at all?"
say "snakemake finished in ${RUN_SECONDS} s (SLURM run ID $RUN_ID)"

# --- the proof: SLURM's accounting database ------------------------------------------------
FIELDS=JobID,Comment,Partition,Account,State,ExitCode
sacct_rows() { sacct -X -n -P --name "$RUN_ID" -S "$START" --format="$FIELDS"; }
# accounting reaches slurmdbd asynchronously: wait until every job has its final record
for ((i = 0; i < 60; i++)); do
  rows=$(sacct_rows || true)
  n=$(grep -c . <<<"$rows" || true)
  pending=$(awk -F'|' '$5 ~ /^(PENDING|RUNNING|COMPLETING|REQUEUED)$/' <<<"$rows" | grep -c . || true)
  ((n >= N_EXPECTED && pending == 0)) && break
  sleep 1
done
echo
sacct -X --name "$RUN_ID" -S "$START" \
  --format=JobID,JobName%36,Comment%40,Partition,Account,AllocCPUS,ReqMem,State,ExitCode,Elapsed
echo

problems=()
awk -F'|' '{c = $2; sub(/^rule_/, "", c); sub(/_wildcards_.*$/, "", c); print c}' <<<"$rows" |
  sort >ran_rules.txt
diff -u expected_rules.txt ran_rules.txt >rules.diff ||
  problems+=("the jobs in sacct differ from the plan (- planned, + in sacct): $(tr '\n' ' ' <rules.diff)")
bad=$(awk -F'|' -v p="$PARTITION" -v a="$ACCOUNT" \
  '$5 != "COMPLETED" || $6 != "0:0" || $3 != p || $4 != a {print $1 " " $2 " " $3 " " $4 " " $5 " " $6}' <<<"$rows")
[[ -z $bad ]] || problems+=("jobs not COMPLETED 0:0 in partition $PARTITION / account $ACCOUNT: $bad")
# every job snakemake submitted is in sacct, and nothing else
submitted=$(sed -n 's/.*submitted with SLURM jobid \([0-9]*\).*/\1/p' snakemake.log | sort -n | tr '\n' ' ')
accounted=$(cut -d'|' -f1 <<<"$rows" | sort -n | tr '\n' ' ')
[[ $submitted == "$accounted" ]] ||
  problems+=("snakemake submitted SLURM jobs [$submitted], sacct shows [$accounted]")
for f in $(sed -n 's/^    input: //p' <(awk '/^rule '"$TARGET"':$/,/^Shell command/' plan.log) | tr -d ','); do
  [[ -s $f ]] || problems+=("target output missing: $f")
done
grep -q "steps (100%) done" snakemake.log || problems+=("snakemake did not report 100% done")

TOTAL=$((SECONDS - T0))
echo "slurm_test: cluster up ${UP_SECONDS} s, workflow ($N_EXPECTED SLURM jobs) ${RUN_SECONDS} s, total ${TOTAL} s (before teardown)"
if ((${#problems[@]})); then
  printf '  - %s\n' "${problems[@]}" >&2
  fail "${#problems[@]} check(s) failed; logs in $RUN_DIR (snakemake.log, .snakemake/slurm_logs/)"
fi
say "PASS: all $N_EXPECTED jobs of '$TARGET' ran through SLURM and COMPLETED"
