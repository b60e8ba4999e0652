#!/usr/bin/env bash
# A multi-node ShoViR sweep on SLURM: one `accelerate launch` per node, one rank per GPU.
#
#   sbatch examples/slurm_sweep.sh                                   # sweep.yaml -> runs/sweep
#   CONFIG=my_sweep.yaml RUN_NAME=medgemma sbatch --nodes=4 examples/slurm_sweep.sh
#
# How it works: calls are sharded by stride over all ranks of all nodes (call i goes to global
# rank i % world size); each rank appends its generations to
# <run>/generations/<model hash>/rank-<r>.jsonl, and the main process (global rank 0, on node 0)
# writes run.json and predictions/ once every rank is done. So:
#   * the run folder (OUT) must be on a filesystem every node sees (home, project or scratch
#     space shared by the cluster, not node-local /tmp): node 0 reads the other nodes' rank files;
#   * only rank 0 takes the folder's writer lock, <run>/run.lock (pid, host, start time); the
#     other nodes never touch it, and a second job writing the same folder is refused;
#   * to resume (time limit, preemption, a failed node, more models or conditions in the
#     config), resubmit the same job with the same CONFIG and RUN_NAME: finished generations are
#     reused and only the missing ones are made. The node count may change between submissions.
#     A job stopped with SIGKILL leaves run.lock behind: on the same host it is recognised as
#     stale and taken over; if the new job's node 0 is another host it is refused. Then check
#     that no job still writes the folder (squeue -u "$USER") and `rm <run>/run.lock`.
#
# Activate the environment with shovir[models] (torch, transformers, accelerate) before sbatch:
# srun passes the environment on to every node.

#SBATCH --job-name=shovir-sweep
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1          # one launcher per node; it starts one rank per GPU
#SBATCH --gpus-per-node=4
#SBATCH --cpus-per-task=16           # image decoding and perturbation (--workers) run on the CPU
#SBATCH --time=24:00:00
#SBATCH --signal=TERM@180            # SIGTERM 3 min before the time limit: ranks flush their batch and exit
# (each launcher passes SIGTERM to its ranks and SIGKILLs them 30 s later; a batch cut off then is
# made again on resume, but a SIGKILLed rank 0 leaves run.lock behind, see above)
#SBATCH --output=%x-%j.out

set -euo pipefail

CONFIG=${CONFIG:-sweep.yaml}
RUN_NAME=${RUN_NAME:-sweep}
OUT=${OUT:-runs/$RUN_NAME}           # on the shared filesystem; keep it fixed across resubmissions
# Every rank opens the dataset. By default each node builds it in its node-local scratch
# ($TMPDIR of that node); a shared CACHE_DIR builds it once, but then build it before submitting
# (file locks on network filesystems are unreliable).
CACHE_DIR=${CACHE_DIR:-}
WORKERS=${WORKERS:-4}
GPUS_PER_NODE=${SLURM_GPUS_PER_NODE:-4}
GPUS_PER_NODE=${GPUS_PER_NODE##*:}   # "a100:4" -> 4

# The rendezvous: node 0 of the allocation (the first host of the node list, SLURM_NODEID 0)
# hosts it; every launcher connects to it. A port derived from the job id keeps two jobs that
# share a node apart.
# (Read the whole list first: with pipefail, `scontrol ... | head -n 1` can die of SIGPIPE.)
NODES=$(scontrol show hostnames "$SLURM_JOB_NODELIST")
MASTER_ADDR=$(head -n 1 <<<"$NODES")
MASTER_PORT=${MASTER_PORT:-$((20000 + SLURM_JOB_ID % 20000))}
export CONFIG OUT CACHE_DIR WORKERS GPUS_PER_NODE MASTER_ADDR MASTER_PORT
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
# with several network interfaces, name the one the nodes reach each other on, e.g.
# export NCCL_SOCKET_IFNAME=ib0 GLOO_SOCKET_IFNAME=ib0

cd "${SLURM_SUBMIT_DIR:-.}"
mkdir -p "$(dirname "$OUT")"
echo "sweep $CONFIG -> $OUT on $SLURM_NNODES nodes x $GPUS_PER_NODE GPUs, rendezvous $MASTER_ADDR:$MASTER_PORT"

# One task per node. The single quotes matter: SLURM_NODEID (the machine rank) differs per node,
# so it must be expanded by each task, not once here on node 0. --kill-on-bad-exit stops every
# node when one fails (a lone node would otherwise wait in a collective); resubmit to resume.
srun --nodes="$SLURM_NNODES" --ntasks-per-node=1 --kill-on-bad-exit=1 bash -c '
  cache_dir=${CACHE_DIR:-${TMPDIR:-/tmp}/shovir-datasets}
  exec accelerate launch --multi_gpu --mixed_precision no --dynamo_backend no --rdzv_backend static \
    --num_machines "$SLURM_NNODES" --machine_rank "$SLURM_NODEID" \
    --main_process_ip "$MASTER_ADDR" --main_process_port "$MASTER_PORT" \
    --num_processes $((SLURM_NNODES * GPUS_PER_NODE)) \
    -m shovir.cli run --config "$CONFIG" --out "$OUT" --cache-dir "$cache_dir" --workers "$WORKERS"
'

# Scoring reads the run folder only: it runs here, on node 0, once every rank has finished
# (set -e skips it when the sweep failed or was stopped). To free the GPUs first, set SCORE=0
# and submit it as its own one-node job instead:
#   sbatch --nodes=1 --dependency=afterok:<this job id> --wrap "shovir score $OUT"
if [ "${SCORE:-1}" = 1 ]; then
  shovir score "$OUT"
fi
