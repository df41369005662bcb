#!/usr/bin/env bash
# The GPT benchmark on the CPU: GPT L4 H4 C128 T128 (nanoGPT's model, the character vocabulary
# of the King James Bible), global batch 32, AdamW (nanoGPT's groups, betas 0.9/0.95, weight
# decay 0.1, clip 1.0, constant lr 1e-3), fp32. TrainBench (`trainbench-cli train --model gpt`)
# at step_size 1 and 4 on --threads threads, against PyTorch eager (bench/torch_gpt_throughput.py)
# at step_size 1 on each of --torch-threads with OMP_WAIT_POLICY=PASSIVE (its better set-up on
# few cores, see docs/BENCHMARKS.md). Builds Release (-O3 -march=native), writes OUT_DIR/results.json
# and the generated "GPT L4 H4 C128 T128 on the CPU" section of docs/BENCHMARKS.md.
#
#   bench/gpt_throughput.sh [--updates N (30)] [--warmup N (5)] [--rounds N (3)] [--threads N (2)]
#                           [--torch-threads "1 2"] [--dataset kjv|text:PATH (kjv)] [--build-dir DIR]
#                           [--no-build] [--max-load L] [--out-dir DIR (out/bench/gpt_cpu)]
#                           [--doc FILE (docs/BENCHMARKS.md) | --no-doc] [--any-blas]
#
# Each case (program, threads, step_size) runs --updates updates in its own process, and its
# time is the median update time after the first --warmup (TrainBench: update_ms of its metrics
# CSV; PyTorch: the same span, see the script). Every case runs once per round, the order
# rotating from round to round, so that load drifting over the minutes lands on every case
# alike; a case's time is the median of its rounds' medians, and the step_size 4 overhead pairs
# the two TrainBench cases round by round.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
updates=30
warmup=5
rounds=3
threads=2
torch_threads="1 2"
dataset=kjv
build_dir="$root/build-bench"
no_build=0
any_blas=0
max_load=""
out_dir="$root/out/bench/gpt_cpu"
doc="$root/docs/BENCHMARKS.md"
invocation="bench/gpt_throughput.sh $*"

while [[ $# -gt 0 ]]; do
    case "$1" in
        --updates) updates=$2; shift 2 ;;
        --warmup) warmup=$2; shift 2 ;;
        --rounds) rounds=$2; shift 2 ;;
        --threads) threads=$2; shift 2 ;;
        --torch-threads) torch_threads=$2; shift 2 ;;
        --dataset) dataset=$2; shift 2 ;;
        --build-dir) build_dir=$2; shift 2 ;;
        --no-build) no_build=1; shift ;;
        --any-blas) any_blas=1; shift ;;
        --max-load) max_load=$2; shift 2 ;;
        --out-dir) out_dir=$2; shift 2 ;;
        --doc) doc=$2; shift 2 ;;
        --no-doc) doc=""; shift ;;
        -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
        *) echo "gpt_throughput.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done
if (( warmup < 0 || warmup >= updates )); then
    echo "gpt_throughput.sh: --warmup must be at least 0 and below --updates" >&2; exit 2
fi

# The issue's benchmark configuration, the same for both programs.
n_layer=4 n_head=4 n_embd=128 block_size=128 batch_size=32 lr=1e-3

source "$root/bench/cpu_bench_common.sh"
require_torch gpt_throughput.sh
# Debian's torch multiplies matrices with whatever libblas.so.3 points to: without
# libopenblas0-pthread that is the reference BLAS, about 20x slower, and the comparison is void.
blas=$("$python" -c 'import torch; torch.ones(2, 2) @ torch.ones(2, 2)
print(next((l.split()[-1] for l in open("/proc/self/maps") if "blas" in l.lower()), "none"))')
if [[ $blas != *openblas* && $any_blas -eq 0 ]]; then
    echo "gpt_throughput.sh: PyTorch's products run on $blas, not OpenBLAS; install it with:" \
         "sudo apt-get install -y libopenblas0-pthread (or pass --any-blas to measure anyway)" >&2
    exit 1
fi

if [[ $no_build -eq 0 ]]; then
    if [[ ! -f "$build_dir/CMakeCache.txt" ]]; then
        cmake -S "$root" -B "$build_dir" -DCMAKE_BUILD_TYPE=Release -DTRAINBENCH_GUI=OFF \
              -DTRAINBENCH_TESTS=OFF -DTRAINBENCH_CUDA=OFF >/dev/null
    fi
    cmake --build "$build_dir" --target trainbench-cli -j"$(nproc)" >/dev/null
fi
cli="$build_dir/app/trainbench-cli"
[[ -x $cli ]] || { echo "gpt_throughput.sh: no $cli (build it, or drop --no-build)" >&2; exit 1; }

mkdir -p "$out_dir"
# An earlier run's files (only ours: --out-dir may name a folder holding other things).
rm -f "$out_dir"/manifest.jsonl "$out_dir"/results.json "$out_dir"/trainbench_t* "$out_dir"/trainbench-eager_t* "$out_dir"/torch_t*

# kjv is TrainBench's extracted copy of Debian's bible-kjv (the first run extracts it; PyTorch's
# side reads the same file). Where bible-kjv is missing, a stand-in text of the same order of
# size is made from this repository's own documentation.
if [[ $dataset == kjv ]] && ! "$cli" train --model gpt --dataset kjv --n-layer 1 --n-head 1 --n-embd 8 \
        --block-size 8 --batch-size 1 --step-size 1 --max-steps 1 --threads 1 --quiet \
        > "$out_dir/kjv_probe.log" 2>&1; then
    echo "gpt_throughput.sh: --dataset kjv unavailable ($(tail -1 "$out_dir/kjv_probe.log")); using the repository's docs, repeated" >&2
    for _ in $(seq 60); do cat "$root/README.md" "$root"/docs/*.md; done > "$out_dir/docs_text.txt"
    dataset="text:$out_dir/docs_text.txt"
fi

[[ -z $max_load ]] || wait_for_load_below "$max_load"

gpt="--n-layer $n_layer --n-head $n_head --n-embd $n_embd --block-size $block_size --batch-size $batch_size"
# --schedule constant --warmup-steps 0: the PyTorch side's constant lr (the GPT recipe's default
# is a warmup and cosine decay); the update time does not depend on it.
ours_cmd="$cli train --model gpt --dataset $dataset $gpt --optimizer adamw --lr $lr --schedule constant"
ours_cmd+=" --warmup-steps 0 --precision fp32 --device cpu --no-shuffle --seed 1 --max-steps $updates"
torch_cmd="$python $root/bench/torch_gpt_throughput.py --dataset $dataset $gpt --lr $lr"
torch_cmd+=" --precision fp32 --device cpu --seed 1 --updates $updates --warmup $warmup"

# One case: "trainbench THREADS STEP_SIZE", "trainbench-eager THREADS STEP_SIZE" (--fused off) or
# "torch THREADS STEP_SIZE".
cases=("trainbench $threads 1" "trainbench $threads 4" "trainbench-eager $threads 1")
for t in $torch_threads; do cases+=("torch $t 1"); done

run_case() {  # run_case ROUND PROGRAM THREADS STEP_SIZE
    local round=$1 program=$2 t=$3 s=$4
    local name="${program}_t${t}_s${s}_r${round}" file
    echo "round $round/$rounds: $program, $t threads, step_size $s ..." >&2
    if [[ $program == trainbench* ]]; then
        local fused=on
        [[ $program == trainbench-eager ]] && fused=off
        file="$out_dir/$name.csv"
        $ours_cmd --threads "$t" --step-size "$s" --fused $fused --metrics-out "$file" > "$out_dir/$name.log" 2>&1
    else
        file="$out_dir/$name.json"
        OMP_WAIT_POLICY=PASSIVE $torch_cmd --threads "$t" --step-size "$s" --out "$file" \
            > /dev/null 2> "$out_dir/$name.log"
    fi || { echo "gpt_throughput.sh: $name failed: $(tail -3 "$out_dir/$name.log")" >&2; exit 1; }
    printf '{"program": "%s", "threads": %d, "step_size": %d, "round": %d, "file": "%s", "log": "%s"}\n' \
        "$program" "$t" "$s" "$round" "$file" "$out_dir/$name.log" >> "$out_dir/manifest.jsonl"
}

load_before=$(load_average)
for round in $(seq "$rounds"); do
    count=${#cases[@]}
    for k in $(seq 0 $((count - 1))); do
        # shellcheck disable=SC2086  # the case's three words are its arguments
        run_case "$round" ${cases[$(((k + round - 1) % count))]}
    done
done
load_after=$(load_average)

relative() { sed "s|$root/||g"; }
# What ran, for the document: the loop above, written out.
steps=("for round in \$(seq $rounds); do  # every case in turn, the order rotating by round"
       "    $(echo "$ours_cmd" | relative) --threads $threads --step-size 1 --metrics-out F.csv"
       "    $(echo "$ours_cmd" | relative) --threads $threads --step-size 4 --metrics-out F.csv"
       "    $(echo "$ours_cmd" | relative) --threads $threads --step-size 1 --fused off --metrics-out F.csv")
for t in $torch_threads; do
    steps+=("    OMP_WAIT_POLICY=PASSIVE $(echo "$torch_cmd" | relative) --threads $t --step-size 1")
done
steps+=("done")
step_args=()
for line in "${steps[@]}"; do step_args+=(--step "$line"); done
doc_args=()
[[ -n $doc ]] && doc_args=(--doc "$doc")
"$python" "$root/bench/write_gpt_benchmarks_md.py" \
    --manifest "$out_dir/manifest.jsonl" --warmup "$warmup" --json-out "$out_dir/results.json" \
    ${doc_args[@]+"${doc_args[@]}"} \
    --config "n_layer=$n_layer" --config "n_head=$n_head" --config "n_embd=$n_embd" \
    --config "block_size=$block_size" --config "batch_size=$batch_size" --config "updates=$updates" \
    --config "warmup=$warmup" --config "rounds=$rounds" --config "dataset=$(echo "$dataset" | relative)" \
    --command "$invocation" "${step_args[@]}" \
    --cpu "$(lscpu | sed -n 's/^Model name:[[:space:]]*//p' | head -1)" \
    --cores "$(nproc)" \
    --date "$(date -u '+%Y-%m-%d %H:%M UTC')" \
    --commit "$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$root" diff --quiet HEAD 2>/dev/null || echo ' + uncommitted changes')" \
    --load-before "$load_before" --load-after "$load_after"
echo "results: $out_dir/results.json${doc:+; updated $doc}" >&2
