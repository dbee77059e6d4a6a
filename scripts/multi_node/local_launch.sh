#!/usr/bin/env bash
# One node of a multi-node run of the built-in benchmark (started per node by the master, e.g.
# over ssh), optionally under rocprofv3. Capture only: nothing here parses the traces; the
# rocprof collector (docs/collectors/rocprof.md) is the route that turns them into metrics.
#
# Usage: local_launch.sh NODE_RANK NODE_IP MASTER_IP MASTER_PORT NNODES WORLD_SIZE \
#          EXPERIMENT_DIR CONFIG_FILE NPROC_PER_NODE CHANNELS THREADS \
#          [ENABLE_ROCPROF=false] [ROCPROF_STATS=false] [ROCPROF_INPUT=""]
# With ENABLE_ROCPROF=true rocprofv3 writes into
#   <EXPERIMENT_DIR>/<THREADS>thread_<CHANNELS>channels/rocprof_traces/node_<NODE_RANK>/
# as `rocprofv3 -i ROCPROF_INPUT -d DIR -- ...` when ROCPROF_INPUT is given, else
# `rocprofv3 --kernel-trace [--stats] --output-format csv -d DIR -- ...`.
# ROCPROF_BIN overrides the rocprofv3 executable.
set -euo pipefail

if [[ $# -lt 11 ]]; then
  sed -n '6,8p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 1
fi
node_rank=$1 node_ip=$2 master_ip=$3 master_port=$4 nnodes=$5 world_size=$6
experiment_dir=$7 config_file=$8 nproc_per_node=$9 channels=${10} threads=${11}
enable_rocprof=${12:-false} rocprof_stats=${13:-false} rocprof_input=${14:-}

case $enable_rocprof in true|false) ;; *)
  echo "error: ENABLE_ROCPROF (arg 12) must be true or false, got '$enable_rocprof'" >&2; exit 1;;
esac
case $rocprof_stats in true|false) ;; *)
  echo "error: ROCPROF_STATS (arg 13) must be true or false, got '$rocprof_stats'" >&2; exit 1;;
esac

output_dir="$experiment_dir/${threads}thread_${channels}channels"
mkdir -p "$output_dir"
config_file=$(cd "$(dirname "$config_file")" && pwd)/$(basename "$config_file")

export RCCL_THREADS_PER_BLOCK=$threads NCCL_MAX_NCHANNELS=$channels HSA_ENABLE_SDMA=0
echo "node $node_rank ($node_ip) of $nnodes, world $world_size -> $output_dir"

cmd=(torchrun --nnodes "$nnodes" --node_rank "$node_rank" --nproc_per_node "$nproc_per_node"
     --master_addr "$master_ip" --master_port "$master_port"
     -m aorta_core.benchmark --config "$config_file"
     "output_dir=$output_dir")

if [[ $enable_rocprof == true ]]; then
  rocprof=${ROCPROF_BIN:-rocprofv3}
  command -v "$rocprof" >/dev/null 2>&1 || {
    echo "error: $rocprof not found; install ROCm's rocprofiler-sdk or set ROCPROF_BIN" >&2; exit 1; }
  trace_dir="$output_dir/rocprof_traces/node_$node_rank"
  mkdir -p "$trace_dir"
  if [[ -n $rocprof_input ]]; then
    [[ -f $rocprof_input ]] || { echo "error: ROCPROF_INPUT $rocprof_input not found" >&2; exit 1; }
    prefix=("$rocprof" -i "$rocprof_input" -d "$trace_dir")
  else
    prefix=("$rocprof" --kernel-trace --output-format csv -d "$trace_dir")
    [[ $rocprof_stats == true ]] && prefix+=(--stats)
  fi
  echo "rocprofv3 traces: $trace_dir"
  exec "${prefix[@]}" -- "${cmd[@]}"
fi
exec "${cmd[@]}"
