#!/usr/bin/env bash
# A real Slurm cluster on loopback for gpuheal's Slurm tier: munged, slurmctld and slurmd from
# Debian's packages (scripts/setup.sh installs them), all running as root in their own directory,
# with this machine as the one compute node. The node declares eight GPUs as generic resources
# (gres gpu:8, each with a device node of its own under DIR/dev standing for /dev/nvidiaN).
#
#   slurm.sh up [--dir DIR] [--node NAME] [--gpus N]
#                        starts munged, slurmctld and slurmd and waits until the node is idle;
#                        prints SLURM_NODE=<name> and then SLURM_CONF=<path> last (clients:
#                        export SLURM_CONF; the daemons' logs are DIR/*.log)
#   slurm.sh down [--dir DIR]
#                        stops exactly what `up` started (by pid) and removes DIR
#
# Several clusters can run at once in different directories (each takes free ports).
set -euo pipefail
cmd=${1:-}
shift || true
dir=""
node=gpunode0
gpus=8
while [[ $# -gt 0 ]]; do
  case $1 in
    --dir) dir=$2; shift 2 ;;
    --node) node=$2; shift 2 ;;
    --gpus) gpus=$2; shift 2 ;;
    *) echo "slurm.sh: unknown argument $1 (usage: slurm.sh up|down [--dir DIR] [--node NAME] [--gpus N])" >&2; exit 2 ;;
  esac
done
[[ $node =~ ^[a-z][a-z0-9-]*$ ]] || { echo "slurm.sh: --node wants a lower-case host name, got '$node'" >&2; exit 2; }
[[ $gpus =~ ^[1-9][0-9]*$ ]] || { echo "slurm.sh: --gpus wants a positive count, got '$gpus'" >&2; exit 2; }
[[ -n $dir ]] || dir=/tmp/gpuheal-slurm
# shellcheck source=free-port.sh
source "$(dirname "$0")/free-port.sh"

stop_all() {
  local pidfile pid p parent
  # The cluster's jobs first, while slurmctld still answers.
  if [[ -f $dir/slurm.conf ]] && [[ -f $dir/slurmctld.pid ]]; then
    SLURM_CONF=$dir/slurm.conf timeout 10 scancel --quiet --full --user=root 2>/dev/null || true
  fi
  # Whatever job is left: its batch script runs from this cluster's spool, under a slurmstepd.
  for p in $(pgrep -f "$dir/spool/" 2>/dev/null || true); do
    parent=$(ps -o ppid= -p "$p" 2>/dev/null | tr -d ' ' || true)
    kill -9 "$p" 2>/dev/null || true
    if [[ -n $parent && $(ps -o comm= -p "$parent" 2>/dev/null || true) == slurmstepd ]]; then
      kill -9 "$parent" 2>/dev/null || true
    fi
  done
  for pidfile in "$dir"/slurmd.pid "$dir"/slurmctld.pid "$dir"/munged.pid; do
    [[ -f $pidfile ]] || continue
    pid=$(cat "$pidfile" 2>/dev/null || true)
    [[ $pid =~ ^[0-9]+$ ]] || continue
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  done
}

case $cmd in
  up)
    for tool in munged slurmctld slurmd sinfo; do
      command -v "$tool" >/dev/null || { echo "slurm.sh: $tool not found; run scripts/setup.sh (Debian packages munge, slurmctld, slurmd, slurm-client)" >&2; exit 1; }
    done
    # A cluster still running in this directory is stopped first, never orphaned.
    [[ -d $dir ]] && stop_all
    rm -rf "$dir"
    mkdir -p "$dir"/munge "$dir"/state "$dir"/spool
    chmod 700 "$dir" "$dir"/munge
    dd if=/dev/urandom of="$dir"/munge/munge.key bs=1024 count=1 status=none
    chmod 400 "$dir"/munge/munge.key
    munged --force --socket="$dir"/munge/munge.socket --key-file="$dir"/munge/munge.key \
      --pid-file="$dir"/munged.pid --log-file="$dir"/munged.log --seed-file="$dir"/munge/munge.seed
    ctld_port=$(free_port)
    slurmd_port=$(free_port)
    cpus=$(nproc)
    cat > "$dir"/slurm.conf <<EOF
ClusterName=gpuheal
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
# cred_expire: how long a requeued job waits before it may start again (Slurm's default 120 s).
AuthInfo=socket=$dir/munge/munge.socket,cred_expire=10
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=1
MpiDefault=none
SwitchType=switch/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
GresTypes=gpu
JobRequeue=1
ReturnToService=2
MinJobAge=600
KillWait=5
InactiveLimit=0
NodeName=$node NodeHostname=$(hostname) NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=1000 Gres=gpu:$gpus State=UNKNOWN
PartitionName=gpu Nodes=$node Default=YES MaxTime=INFINITE State=UP
EOF
    # Slurm keeps only GPUs with a device file; these stand for /dev/nvidiaN (NVIDIA's major, 195)
    # and are never opened by a job here.
    mkdir -p "$dir"/dev
    for ((i = 0; i < gpus; i++)); do
      mknod "$dir/dev/nvidia$i" c 195 "$i" 2>/dev/null || touch "$dir/dev/nvidia$i"
    done
    cat > "$dir"/gres.conf <<EOF
NodeName=$node Name=gpu File=$dir/dev/nvidia[0-$((gpus - 1))]
EOF
    export SLURM_CONF=$dir/slurm.conf
    slurmctld -c -f "$SLURM_CONF" || { tail -20 "$dir"/slurmctld.log >&2; stop_all; exit 1; }
    slurmd -N "$node" -f "$SLURM_CONF" || { tail -20 "$dir"/slurmd.log >&2; stop_all; exit 1; }
    state=""
    for _ in $(seq 1 300); do
      state=$(sinfo -h -n "$node" -o '%T' 2>/dev/null || true)
      [[ $state == idle ]] && break
      sleep 0.1
    done
    if [[ $state != idle ]]; then
      echo "slurm.sh: node $node is '${state:-unknown}', not idle, after 30 s; logs:" >&2
      tail -n 20 "$dir"/slurmctld.log "$dir"/slurmd.log >&2 || true
      stop_all
      exit 1
    fi
    echo "SLURM_NODE=$node"
    echo "SLURM_CONF=$SLURM_CONF"
    ;;
  down)
    stop_all
    rm -rf "$dir"
    ;;
  *)
    echo "usage: slurm.sh up|down [--dir DIR] [--node NAME] [--gpus N]" >&2
    exit 2
    ;;
esac
