#!/usr/bin/env bash
# Builds Release (-O3 -march=native, the project's default) and measures, in one go and with the
# same thread count: the machine's fp32 GEMM peak, TrainBench's samples/s on issue 2's MLP, the
# same in PyTorch, and (unless --skip-compare) `trainbench-cli compare`; then updates the
# generated sections of docs/BENCHMARKS.md.
#
#   bench/run_cpu_bench.sh [--threads N (2)] [--build-dir DIR] [--rounds N (5)] [--steps N (40)]
#                          [--skip-compare] [--no-build] [--max-load L]
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
threads=2
build_dir="$root/build-bench"
rounds=5
steps=40
skip_compare=0
no_build=0
max_load=""
invocation="bench/run_cpu_bench.sh $*"

while [[ $# -gt 0 ]]; do
    case "$1" in
        --threads) threads=$2; shift 2 ;;
        --build-dir) build_dir=$2; shift 2 ;;
        --rounds) rounds=$2; shift 2 ;;
        --steps) steps=$2; shift 2 ;;
        --skip-compare) skip_compare=1; shift ;;
        --no-build) no_build=1; shift ;;
        --max-load) max_load=$2; shift 2 ;;
        -h|--help) sed -n '2,8p' "$0"; exit 0 ;;
        *) echo "run_cpu_bench.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done

source "$root/bench/cpu_bench_common.sh"
require_torch run_cpu_bench.sh

if [[ $no_build -eq 0 ]]; then
    if [[ ! -f "$build_dir/CMakeCache.txt" ]]; then
        cmake -S "$root" -B "$build_dir" -DCMAKE_BUILD_TYPE=Release -DTRAINBENCH_GUI=OFF \
              -DTRAINBENCH_TESTS=OFF -DTRAINBENCH_CUDA=OFF >/dev/null
    fi
    cmake --build "$build_dir" --target gemm_peak mlp_throughput trainbench-cli -j"$(nproc)" >/dev/null
fi

[[ -z $max_load ]] || wait_for_load_below "$max_load"

results=$(mktemp -d)
trap 'rm -rf "$results"' EXIT
load_before=$(load_average)

gemm_cmd="$build_dir/bench/gemm_peak --threads $threads --json"
ours_cmd="$build_dir/bench/mlp_throughput --threads $threads --rounds 1 --steps $steps --json"
torch_cmd="$python $root/bench/torch_mlp_throughput.py --threads $threads --rounds 1 --steps $steps --json"
compare_cmd="$build_dir/app/trainbench-cli compare --threads $threads"

echo "gemm peak ..." >&2
$gemm_cmd | tee "$results/gemm.jsonl" >&2
# The two programs alternate round by round, so that a change in background load during the
# run does not land on one of them only.
for round in $(seq "$rounds"); do
    echo "round $round/$rounds: TrainBench ..." >&2
    $ours_cmd | tee -a "$results/trainbench.jsonl" >&2
    echo "round $round/$rounds: PyTorch ..." >&2
    $torch_cmd | tee -a "$results/torch.jsonl" >&2
    # libgomp's threads spin after each parallel region while OpenBLAS's pthreads spin after
    # each product: on few cores they take turns on the CPU. PASSIVE makes the OpenMP ones
    # sleep instead; measured too, so the comparison is against PyTorch at its best here.
    echo "round $round/$rounds: PyTorch, OMP_WAIT_POLICY=PASSIVE ..." >&2
    OMP_WAIT_POLICY=PASSIVE $torch_cmd | tee -a "$results/torch.jsonl" >&2
done
compare_args=()
if [[ $skip_compare -eq 0 ]]; then
    echo "trainbench-cli compare ..." >&2
    $compare_cmd --out-md "$results/compare.md" >&2
    compare_args=(--compare-md "$results/compare.md" --compare-command "trainbench-cli compare --threads $threads")
fi
load_after=$(load_average)

relative() { sed "s|$root/||g"; }
"$python" "$root/bench/write_benchmarks_md.py" \
    --out "$root/docs/BENCHMARKS.md" \
    --gemm "$results/gemm.jsonl" --trainbench "$results/trainbench.jsonl" --torch "$results/torch.jsonl" \
    "${compare_args[@]}" \
    --command "$invocation" \
    --step "$(echo "$gemm_cmd" | relative)" \
    --step "for round in \$(seq $rounds); do" \
    --step "    $(echo "$ours_cmd" | relative)" --step "    $(echo "$torch_cmd" | relative)" \
    --step "    OMP_WAIT_POLICY=PASSIVE $(echo "$torch_cmd" | relative)" --step "done" \
    --cpu "$(lscpu | sed -n 's/^Model name:[[:space:]]*//p' | head -1)" \
    --cores "$(nproc)" \
    --date "$(date -u '+%Y-%m-%d %H:%M UTC')" \
    --commit "$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$root" diff --quiet HEAD 2>/dev/null || echo ' + uncommitted changes')" \
    --load-before "$load_before" --load-after "$load_after"
echo "updated $root/docs/BENCHMARKS.md" >&2
