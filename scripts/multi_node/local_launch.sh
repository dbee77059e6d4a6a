#!/usr/bin/env bash
# One node of a multi-node run of the built-in benchmark (started per node by the master, e.g.
# over ssh), optionally under rocprofv3, optionally inside a running container. Capture only:
# nothing here parses the traces; the rocprof collector (docs/collectors/rocprof.md) does that.
#
# Usage: local_launch.sh NODE_RANK NODE_IP MASTER_IP MASTER_PORT NNODES WORLD_SIZE \
#          EXPERIMENT_DIR CONFIG_FILE NPROC_PER_NODE CHANNELS THREADS \
#          [ENABLE_ROCPROF=false] [ROCPROF_STATS=false] [ROCPROF_INPUT=""] [DOCKER_CONTAINER=""] \
#          [AMD_WAIT=false]
# With ENABLE_ROCPROF=true rocprofv3 writes into
#   <EXPERIMENT_DIR>/<THREADS>thread_<CHANNELS>channels/rocprof_traces/node_<NODE_RANK>/
# as `rocprofv3 -i ROCPROF_INPUT -d DIR -- ...` when ROCPROF_INPUT is given (an example:
# scripts/gemm_analysis/rocprof_input.yaml), else
# `rocprofv3 --kernel-trace [--stats] --output-format csv -d DIR -- ...`.
# DOCKER_CONTAINER (argument 15, or the environment variable of that name): run the command in
# that running container with `docker exec`; the paths must be the same inside it. Empty: here.
# ROCPROF_BIN overrides the rocprofv3 executable.
set -euo pipefail

if [[ $# -lt 11 ]]; then
  sed -n '6,9p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 1
fi
node_rank=$1 node_ip=$2 master_ip=$3 master_port=$4 nnodes=$5 world_size=$6
experiment_dir=$7 config_file=$8 nproc_per_node=$9 channels=${10} threads=${11}
enable_rocprof=${12:-false} rocprof_stats=${13:-false} rocprof_input=${14:-}
container=${15:-${DOCKER_CONTAINER:-}} amd_wait=${16:-false}

bool_arg() {  # NAME VALUE
  case $2 in true|false) ;; *) echo "error: $1 must be true or false, got '$2'" >&2; exit 1;; esac
}
bool_arg "ENABLE_ROCPROF (arg 12)" "$enable_rocprof"
bool_arg "ROCPROF_STATS (arg 13)" "$rocprof_stats"
bool_arg "AMD_WAIT (arg 16)" "$amd_wait"
if [[ -n $container ]]; then
  command -v docker >/dev/null 2>&1 || {
    echo "error: docker not found, but DOCKER_CONTAINER=$container was given; install docker or leave it empty to run here" >&2; exit 1; }
  running=$(docker inspect -f '{{.State.Running}}' "$container" 2>/dev/null) || running="no such container"
  [[ $running == true ]] || {
    echo "error: container $container is not running (docker inspect: $running); start it with docker start $container, or leave DOCKER_CONTAINER empty to run here" >&2; exit 1; }
fi

output_dir="$experiment_dir/${threads}thread_${channels}channels"
mkdir -p "$output_dir"
output_dir=$(cd "$output_dir" && pwd)
config_file=$(cd "$(dirname "$config_file")" && pwd)/$(basename "$config_file")

env_vars=(RCCL_THREADS_PER_BLOCK="$threads" NCCL_MAX_NCHANNELS="$channels" HSA_ENABLE_SDMA=0)
[[ $amd_wait == true ]] && env_vars+=(AMD_OCL_WAIT_COMMAND=1)
echo "node $node_rank ($node_ip) of $nnodes, world $world_size -> $output_dir"

cmd=(torchrun --nnodes "$nnodes" --node_rank "$node_rank" --nproc_per_node "$nproc_per_node"
     --master_addr "$master_ip" --master_port "$master_port"
     -m aorta_core.benchmark --config "$config_file"
     --override profiling.tensorboard=false "training.output_dir=$output_dir")

if [[ $enable_rocprof == true ]]; then
  rocprof=${ROCPROF_BIN:-rocprofv3}
  [[ -n $container ]] || command -v "$rocprof" >/dev/null 2>&1 || {
    echo "error: $rocprof not found; install ROCm's rocprofiler-sdk or set ROCPROF_BIN" >&2; exit 1; }
  trace_dir="$output_dir/rocprof_traces/node_$node_rank"
  mkdir -p "$trace_dir"
  if [[ -n $rocprof_input ]]; then
    [[ -f $rocprof_input ]] || { echo "error: ROCPROF_INPUT $rocprof_input not found" >&2; exit 1; }
    rocprof_input=$(cd "$(dirname "$rocprof_input")" && pwd)/$(basename "$rocprof_input")
    prefix=("$rocprof" -i "$rocprof_input" -d "$trace_dir")
  else
    prefix=("$rocprof" --kernel-trace --output-format csv -d "$trace_dir")
    [[ $rocprof_stats == true ]] && prefix+=(--stats)
  fi
  echo "rocprofv3 traces: $trace_dir"
  cmd=("${prefix[@]}" -- "${cmd[@]}")
fi

if [[ -n $container ]]; then
  echo "running in container $container"
  tty=()
  [[ -t 0 ]] && tty=(-it)  # a terminal: Ctrl-C reaches the run (docker exec forwards no signals)
  exec docker exec "${tty[@]}" "$container" env "${env_vars[@]}" "${cmd[@]}"
fi
exec env "${env_vars[@]}" "${cmd[@]}"
