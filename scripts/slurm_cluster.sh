#!/usr/bin/env bash
# A real single-node SLURM (with accounting, so `sacct` works) for testing the slurm profile.
#
#   bash scripts/slurm_cluster.sh up       install if missing, start, wait until the node is idle
#   bash scripts/slurm_cluster.sh status   daemons, PIDs and `sinfo`; exit 0 only when usable
#   bash scripts/slurm_cluster.sh down     cancel our jobs, stop exactly the daemons `up` started
#   bash scripts/slurm_cluster.sh env      print `export SLURM_CONF=...` (eval it to use sinfo etc.)
#
# Debian 12, run as root, no systemd: munged, mariadbd, slurmdbd, slurmctld and slurmd are started
# by hand, in the foreground of their own session, and their PIDs are recorded in $STATE/pids;
# `down` stops only those PIDs. A munged that was already running is used, never stopped.
# Configs, logs, spool and the private MariaDB data directory live in the state directory
# (SLURM_STATE_DIR, default /tmp/marginmine-slurm); clients find the config through SLURM_CONF.
# Recipe and pitfalls: /work/shared/notes/slurm-single-node.md.
#
# Settings (environment): SLURM_PARTITION=main and SLURM_ACCOUNT=marginmine (must match
# default-resources in profiles/default/config.yaml), SLURM_CLUSTER=marginmine, SLURM_PORT_BASE=6817 (slurmctld; slurmd
# +1, slurmdbd +2), SLURM_DB_PORT=13306 (MariaDB on 127.0.0.1).
set -euo pipefail

STATE=${SLURM_STATE_DIR:-/tmp/marginmine-slurm}
PARTITION=${SLURM_PARTITION:-main}
ACCOUNT=${SLURM_ACCOUNT:-marginmine}
CLUSTER=${SLURM_CLUSTER:-marginmine}
PORT_BASE=${SLURM_PORT_BASE:-6817}
DB_PORT=${SLURM_DB_PORT:-13306}
PACKAGES=(slurm-wlm munge slurmdbd mariadb-server)
DAEMONS=(munged mariadbd slurmdbd slurmctld slurmd) # start order; `down` stops in reverse

ETC=$STATE/etc PIDS=$STATE/pids LOG=$STATE/log RUN=$STATE/run
export SLURM_CONF=$ETC/slurm.conf
NODE=$(hostname -s)
DB_RUN=$STATE/mariadb-run # socket, pid and error log: mariadbd runs as mysql
DB_SOCK=$DB_RUN/mysqld.sock

say() { printf '[slurm_cluster %s] %s\n' "$(date +%T)" "$*" >&2; }
die() { say "ERROR: $*  ('$0 down' stops what was started)"; exit 1; }

# --- PID bookkeeping: a recorded PID counts only while it is alive and still runs that binary --

pid_of() { # daemon -> PID if we recorded it and it is alive, else nothing
  local f=$PIDS/$1.pid pid
  [[ -s $f ]] || return 1
  pid=$(<"$f")
  [[ -r /proc/$pid/comm && $(</proc/"$pid"/comm) == "$1"* ]] || return 1
  echo "$pid"
}

start_daemon() { # name logfile command... : own session, stdin closed, PID recorded
  local name=$1 logfile=$2 pid
  shift 2
  setsid "$@" </dev/null >>"$logfile" 2>&1 &
  pid=$!
  echo "$pid" >"$PIDS/$name.pid"
  say "started $name (pid $pid)"
}

wait_for() { # description seconds daemon|- command... : poll until the command succeeds;
  # fails at once when the named daemon (one we started) has exited
  local what=$1 secs=$2 daemon=$3 t0=$SECONDS
  shift 3
  until "$@" >/dev/null 2>&1; do
    ((SECONDS - t0 < secs)) || return 1
    # (kill -0, not pid_of: right after the start the PID may still run setsid/setpriv)
    if [[ $daemon != - ]] && ! kill -0 "$(<"$PIDS/$daemon.pid")" 2>/dev/null; then
      say "$daemon exited"
      return 1
    fi
    sleep 0.5
  done
  say "$what ($((SECONDS - t0)) s)"
}

alive() { pid_of "$1" >/dev/null; }

# --- install ------------------------------------------------------------------------------

install_packages() {
  local bin missing=0
  for bin in munged mariadbd mariadb-install-db slurmdbd slurmctld slurmd sacctmgr sacct sinfo; do
    command -v "$bin" >/dev/null || missing=1
  done
  ((missing)) || return 0
  say "installing ${PACKAGES[*]}"
  # no init system here: keep the packages from starting their services (we start our own)
  local policy=/usr/sbin/policy-rc.d added=0
  if [[ ! -e $policy ]]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod 755 "$policy" && added=1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -q --no-install-recommends "${PACKAGES[@]}" >"$STATE/apt.log" 2>&1 ||
    { apt-get update -q >>"$STATE/apt.log" 2>&1 &&
      apt-get install -y -q --no-install-recommends "${PACKAGES[@]}" >>"$STATE/apt.log" 2>&1; } ||
    { ((added)) && rm -f "$policy"; die "apt-get install failed, see $STATE/apt.log"; }
  ((added)) && rm -f "$policy"
  say "installed"
}

# --- configuration ------------------------------------------------------------------------

db_password() { # one random password per state directory
  [[ -s $ETC/db.pass ]] || (umask 077 && head -c 18 /dev/urandom | base64 | tr -d '/+=' >"$ETC/db.pass")
  cat "$ETC/db.pass"
}

write_configs() {
  local cpus mem_kb real_mb
  cpus=${SLURM_CPUS:-$(nproc)}
  mem_kb=$(awk '/^MemTotal:/ {print $2}' /proc/meminfo)
  real_mb=$((mem_kb * 95 / 100 / 1024)) # a little under the machine's: slurmd must not see less
  cat >"$ETC/slurm.conf" <<EOF
# written by scripts/slurm_cluster.sh - single-node test cluster
ClusterName=$CLUSTER
SlurmctldHost=$NODE(127.0.0.1)
SlurmctldPort=$PORT_BASE
SlurmdPort=$((PORT_BASE + 1))
SlurmUser=slurm
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation=$STATE/spool/slurmctld
SlurmdSpoolDir=$STATE/spool/slurmd
SlurmctldPidFile=$RUN/slurmctld.pid
SlurmdPidFile=$RUN/slurmd.pid
SlurmctldLogFile=$LOG/slurmctld.log
SlurmdLogFile=$LOG/slurmd.log
# no cgroups in this container
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SchedulerType=sched/backfill
ReturnToService=2
SlurmdParameters=config_overrides
# slurmd fetches this file from slurmctld and publishes it in /run/slurm/conf: the executor's
# jobstep plugin strips SLURM_* (SLURM_CONF too) before its srun inside the job, so srun finds
# the config there (the default /etc/slurm/slurm.conf is not written)
SlurmctldParameters=enable_configless
# the executor plugin recommends MinJobAge >= 120 s for squeue-based status checks
MinJobAge=300
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=10
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort=$((PORT_BASE + 2))
# keep the executor's --comment (rule_<name>_wildcards_...) in the accounting database
AccountingStoreFlags=job_comment
JobCompType=jobcomp/none
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$real_mb State=UNKNOWN
PartitionName=$PARTITION Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
EOF
  (
    umask 077
    cat >"$ETC/slurmdbd.conf" <<EOF
# written by scripts/slurm_cluster.sh
AuthType=auth/munge
DbdHost=localhost
DbdPort=$((PORT_BASE + 2))
SlurmUser=slurm
PidFile=$RUN/slurmdbd.pid
LogFile=$LOG/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$DB_PORT
StorageUser=slurm
StoragePass=$(db_password)
StorageLoc=slurm_acct_db
EOF
  )
  chown slurm:slurm "$ETC/slurmdbd.conf"
  chmod 600 "$ETC/slurmdbd.conf"
}

# --- the daemons --------------------------------------------------------------------------

munge_works() { munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1; }

start_munged() {
  if alive munged; then return; fi
  if munge_works; then
    say "munged already running (not started by this script; left alone)"
    return
  fi
  install -d -o munge -g munge -m 755 /run/munge
  install -d -o munge -g munge -m 700 /var/log/munge /var/lib/munge
  if [[ ! -s /etc/munge/munge.key ]]; then
    setpriv --reuid=munge --regid=munge --init-groups mungekey --create --keyfile=/etc/munge/munge.key
  fi
  start_daemon munged "$LOG/munged.out" setpriv --reuid=munge --regid=munge --init-groups munged -F
  wait_for "munge answers" 20 munged munge_works || die "munged did not start, see $LOG/munged.out"
}

sql() { mariadb --no-defaults -uroot --socket="$DB_SOCK" -e "$1"; }

start_mariadbd() {
  if alive mariadbd; then return; fi
  install -d -o mysql -g mysql -m 755 "$DB_RUN"
  if [[ ! -d $STATE/mysql/mysql ]]; then
    install -d -o mysql -g mysql -m 750 "$STATE/mysql"
    mariadb-install-db --no-defaults --user=mysql --datadir="$STATE/mysql" \
      --auth-root-authentication-method=socket --skip-test-db >"$LOG/mariadb-install.log" 2>&1 ||
      die "mariadb-install-db failed, see $LOG/mariadb-install.log"
  fi
  start_daemon mariadbd "$LOG/mariadbd.out" mariadbd --no-defaults --user=mysql \
    --datadir="$STATE/mysql" --socket="$DB_SOCK" --pid-file="$DB_RUN/mariadbd.pid" \
    --bind-address=127.0.0.1 --port="$DB_PORT" --log-error="$DB_RUN/mariadbd.log" \
    --skip-log-bin --innodb-buffer-pool-size=64M --innodb-log-file-size=16M
  wait_for "mariadb answers" 60 mariadbd sql "SELECT 1" || die "mariadbd did not start, see $DB_RUN/mariadbd.log"
  local pass
  pass=$(db_password)
  sql "CREATE DATABASE IF NOT EXISTS slurm_acct_db;
       CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY '$pass';
       CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY '$pass';
       GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';
       GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';"
}

start_slurmdbd() {
  if alive slurmdbd; then return; fi
  # slurmdbd has no -f: it reads slurmdbd.conf beside $SLURM_CONF
  start_daemon slurmdbd "$LOG/slurmdbd.out" slurmdbd -D
  wait_for "slurmdbd answers" 60 slurmdbd sacctmgr -n list cluster ||
    die "slurmdbd did not start, see $LOG/slurmdbd.log"
}

accounting_setup() { # idempotent: cluster, account, root's association
  sacctmgr -n -P list cluster format=cluster | grep -qx "$CLUSTER" ||
    sacctmgr -i add cluster "$CLUSTER" >/dev/null
  sacctmgr -n -P list account format=account | grep -qx "$ACCOUNT" ||
    sacctmgr -i add account "$ACCOUNT" Cluster="$CLUSTER" Description="marginmine tests" \
      Organization=marginmine >/dev/null
  sacctmgr -n -P list user format=user,defaultaccount | grep -qx "root|$ACCOUNT" ||
    sacctmgr -i add user root Account="$ACCOUNT" DefaultAccount="$ACCOUNT" >/dev/null
}

node_state() { sinfo -h --responding -n "$NODE" -o %T 2>/dev/null | head -n 1; }
node_usable() { [[ $(node_state) =~ ^(idle|mixed|allocated|completing)$ ]]; }

start_slurm() {
  if ! alive slurmctld; then
    start_daemon slurmctld "$LOG/slurmctld.out" slurmctld -D -f "$ETC/slurm.conf"
    wait_for "slurmctld answers" 60 slurmctld scontrol ping || die "slurmctld did not start, see $LOG/slurmctld.log"
  fi
  if ! alive slurmd; then
    [[ -e /run/slurm ]] || touch "$STATE/created-run-slurm" # slurmd creates it; down removes it
    start_daemon slurmd "$LOG/slurmd.out" slurmd -D --conf-server "127.0.0.1:$PORT_BASE"
  fi
  # a node left DOWN by an earlier run's unclean stop comes back with ReturnToService=2;
  # resume it explicitly in case it was drained
  wait_for "node $NODE usable" 60 slurmd node_usable || {
    scontrol update NodeName="$NODE" State=RESUME >/dev/null 2>&1 || true
    wait_for "node $NODE usable after resume" 30 slurmd node_usable
  } || die "node $NODE is '$(node_state)', see $LOG/slurmd.log and $LOG/slurmctld.log"
}

cmd_up() {
  local t0=$SECONDS
  [[ $(id -u) == 0 ]] || die "run as root"
  # srun inside a job reads /etc/slurm/slurm.conf before slurmd's /run/slurm/conf
  [[ ! -e /etc/slurm/slurm.conf ]] ||
    die "/etc/slurm/slurm.conf exists (another SLURM here?): jobs would use it; not starting"
  mkdir -p "$STATE" "$ETC" "$PIDS" "$LOG" "$RUN"
  chmod 755 "$STATE"
  install_packages
  install -d -o slurm -g slurm -m 755 "$LOG" "$RUN" "$STATE/spool/slurmctld"
  install -d -m 755 "$STATE/spool/slurmd"
  # the configs are only rewritten while no slurm daemon of ours reads them
  if ! alive slurmdbd && ! alive slurmctld && ! alive slurmd; then write_configs; fi
  start_munged
  start_mariadbd
  start_slurmdbd
  accounting_setup
  start_slurm
  say "up in $((SECONDS - t0)) s: partition '$PARTITION', account '$ACCOUNT'; clients need: export SLURM_CONF=$SLURM_CONF"
}

cmd_down() {
  local name pid i n
  if alive slurmctld; then # our cluster: nothing of it may outlive the daemons
    local jobs
    mapfile -t jobs < <(squeue -h -o %i 2>/dev/null)
    if ((${#jobs[@]})); then
      say "cancelling jobs still in the queue: ${jobs[*]}"
      scancel "${jobs[@]}" 2>/dev/null || true
      for ((i = 0; i < 40; i++)); do
        [[ -z $(squeue -h -o %i 2>/dev/null) ]] && break
        sleep 0.5
      done
    fi
  fi
  for ((i = ${#DAEMONS[@]} - 1; i >= 0; i--)); do
    name=${DAEMONS[i]}
    pid=$(pid_of "$name") || { rm -f "$PIDS/$name.pid"; continue; }
    kill -TERM "$pid" 2>/dev/null || true
    for ((n = 0; n < 60; n++)); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.5
    done
    if kill -0 "$pid" 2>/dev/null; then
      say "$name (pid $pid) ignored SIGTERM for 30 s: SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
    fi
    rm -f "$PIDS/$name.pid"
    say "stopped $name (pid $pid)"
  done
  # slurmd's configless link into our spool directory
  if [[ -L /run/slurm/conf && $(readlink /run/slurm/conf) == "$STATE"/* ]]; then rm -f /run/slurm/conf; fi
  if [[ -e $STATE/created-run-slurm ]]; then
    rmdir /run/slurm 2>/dev/null || true
    rm -f "$STATE/created-run-slurm"
  fi
}

cmd_status() {
  local name pid ok=0
  for name in "${DAEMONS[@]}"; do
    if pid=$(pid_of "$name"); then
      printf '%-10s running, pid %s\n' "$name" "$pid"
    elif [[ $name == munged ]] && command -v munge >/dev/null && munge_works; then
      printf '%-10s running (not started by this script)\n' "$name"
    else
      printf '%-10s not running\n' "$name"
      ok=1
    fi
  done
  if ((ok == 0)) && node_usable; then
    sinfo
    echo "SLURM_CONF=$SLURM_CONF"
    return 0
  fi
  return 3
}

case ${1:-} in
  up) cmd_up ;;
  down) cmd_down ;;
  status) cmd_status ;;
  env) echo "export SLURM_CONF=$SLURM_CONF" ;;
  *)
    echo "usage: $0 up|down|status|env   (state: $STATE)" >&2
    exit 2
    ;;
esac
