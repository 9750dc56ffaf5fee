#!/bin/bash
# Written by `cockpit slurm up`: a Ray cluster on this job's nodes (the head on the first), the join
# gate, then the profile's job. The Slurm job ends with the Ray job, with its exit code.
@SBATCH@
set -uo pipefail

PYTHON=@PYTHON@
RAY=@RAY@
PROFILE=@PROFILE@
OVERRIDES=(@OVERRIDES@)
GPUS_PER_NODE=@GPUS_PER_NODE@
TOKENS=@TOKENS@
LOGS="${SLURM_SUBMIT_DIR:-$PWD}/${SLURM_JOB_ID}-logs"
mkdir -p "$LOGS"
say() { echo "[cockpit $(date +%H:%M:%S)] $*"; }
free_port() {
  "$PYTHON" -I -c 'import socket; s = socket.socket(); s.bind(("", 0)); print(s.getsockname()[1])'
}

mapfile -t HOSTS < <(scontrol show hostnames "$SLURM_JOB_NODELIST")
HEAD=${HOSTS[0]}
HEAD_IP=$(srun --overlap --nodes=1 --ntasks=1 -w "$HEAD" hostname --ip-address | awk '{print $1}')
GCS_PORT=$(free_port)
DASHBOARD_PORT=$(free_port)
CLIENT_PORT=$(free_port)
AGENT_PORT=$(free_port)
say "head $HEAD ($HEAD_IP), ${#HOSTS[@]} node(s); dashboard at 127.0.0.1:$DASHBOARD_PORT on the head"
# Where `cockpit connect slurm:JOBID` finds the dashboard.
scontrol update JobId="$SLURM_JOB_ID" Comment="cockpit:dashboard_port=$DASHBOARD_PORT" \
  || say "could not write the port in the job's comment: connect with --dashboard-port $DASHBOARD_PORT"

AUTH=()
export RAY_AUTH_MODE=disabled RAY_USAGE_STATS_ENABLED=0
# Ray stops here only once the job is over or the allocation is going away: no drain (30 s by default)
# that would hold the nodes in COMPLETING.
export RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S=${RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S:-0}
if [ -n "$TOKENS" ]; then
  # A fresh token for this cluster, in the user's private state directory (0600), removed at the end.
  TOKEN_FILE="$TOKENS/$SLURM_JOB_ID/token"
  (umask 077 && mkdir -p "$TOKENS/$SLURM_JOB_ID" \
    && "$PYTHON" -I -c 'import secrets; print(secrets.token_urlsafe(32))' > "$TOKEN_FILE") || exit 1
  export RAY_AUTH_MODE=token
  RAY_AUTH_TOKEN=$(cat "$TOKEN_FILE")
  export RAY_AUTH_TOKEN
  AUTH=(--token-file "$TOKEN_FILE")
fi

stop_ray() {
  say "stopping Ray"
  kill $(jobs -p) 2>/dev/null
  wait
  if [ -n "${TOKEN_FILE:-}" ]; then rm -f "$TOKEN_FILE"; rmdir "$TOKENS/$SLURM_JOB_ID" 2>/dev/null; fi
}
trap stop_ray EXIT
trap 'exit 143' TERM INT

# Each node's Ray in a step of its own, with its own temp dir; --overlap: the steps share the CPUs.
srun --overlap --nodes=1 --ntasks=1 -w "$HEAD" --output="$LOGS/ray-head.log" \
  "$RAY" start --head --block --node-ip-address="$HEAD_IP" --port="$GCS_PORT" \
  --dashboard-host=127.0.0.1 --dashboard-port="$DASHBOARD_PORT" \
  --ray-client-server-port="$CLIENT_PORT" --dashboard-agent-listen-port="$AGENT_PORT" \
  --num-gpus="$GPUS_PER_NODE" --temp-dir="/tmp/ray-cockpit-$SLURM_JOB_ID-0" --disable-usage-stats &
for ((i = 1; i < ${#HOSTS[@]}; i++)); do
  srun --overlap --nodes=1 --ntasks=1 -w "${HOSTS[$i]}" --output="$LOGS/ray-worker-$i.log" \
    "$RAY" start --block --address="$HEAD_IP:$GCS_PORT" --num-gpus="$GPUS_PER_NODE" \
    --temp-dir="/tmp/ray-cockpit-$SLURM_JOB_ID-$i" --disable-usage-stats &
done

DASHBOARD="http://127.0.0.1:$DASHBOARD_PORT"
GPUS=$(( ${#HOSTS[@]} * GPUS_PER_NODE ))
say "waiting for ${#HOSTS[@]} node(s) and $GPUS GPU(s) to join"
"$PYTHON" -m cockpit.cli wait "$DASHBOARD" ${AUTH[@]+"${AUTH[@]}"} --nodes "${#HOSTS[@]}" --gpus "$GPUS" \
  --timeout @JOIN_TIMEOUT@ || exit $?
say "cluster ready: submitting $PROFILE"
"$PYTHON" -m cockpit.cli submit "$DASHBOARD" ${AUTH[@]+"${AUTH[@]}"} "$PROFILE" \
  ${OVERRIDES[@]+"${OVERRIDES[@]}"} \
  --nodes "${#HOSTS[@]}" --gpus-per-node "$GPUS_PER_NODE" --follow
status=$?
say "the Ray job ended (exit $status)"
exit $status
