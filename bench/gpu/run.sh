#!/usr/bin/env bash
# Everything the CUDA engine must show, on a lent GPU machine (nvcc, CMake, PyTorch; no Qt, no
# network). Before, on a networked machine: bench/gpu/fetch_deps.sh fills .deps/, which is
# git-ignored, so the device tool must be told to take it along: run with carry [".deps"].
#   build     trainbench_core + trainbench-cli with CUDA (-DTRAINBENCH_GUI=OFF, no tests: Qt)
#   check     fp32 CUDA vs CPU over 50 updates (losses and final weights < 1e-4 rel.), bf16/fp16
#             vs CPU fp32 within the documented tolerance, accumulation (step_size 4 vs 1) on
#             the GPU, --preload-device vs per-micro-batch copies
#   sanitize  compute-sanitizer memcheck and racecheck on a short run
#   speed     784-4096-4096-4096-10, batch 4096, fp32/bf16/fp16 (trainbench)
#   torch     the same in PyTorch eager (and torch.compile unless TORCH_COMPILE=0), and the
#             measured bf16 GEMM peak
#   summary   the table (TFLOP/s against the bf16 peak) and the checks
# Usage: bench/gpu/run.sh [STAGE...]   (no stage: all of them, in this order). One device call
# may run at most 10 minutes: split the stages over calls (the build and the results under
# out/gpu stay on a warm machine between calls), e.g. "build check sanitize", then
# "speed torch summary".
# Bulky files (logs, CSVs, weights, generated data) stay in out/gpu; $OUT, which brings at most
# 8 files back, receives results.md, results.json, checks.txt, device.txt, torch.json and
# logs.tar.gz.
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
here="$root/bench/gpu"
deps="$root/.deps"
work="$root/out/gpu"
mkdir -p "$work"
touch "$work/checks.txt"
jobs="$(nproc)"
python="$(command -v python3)"
cli="$root/build-gpu/app/trainbench-cli"

stages=("$@")
[ ${#stages[@]} -gt 0 ] || stages=(build check sanitize speed torch summary)
wants() { local s; for s in "${stages[@]}"; do [ "$s" = "$1" ] && return 0; done; return 1; }

step() { printf '\n=== %s\n' "$*"; }
record() { echo "$*" | tee -a "$work/checks.txt"; }

step "device"
{
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  nvcc --version | tail -1
  date -u +%Y-%m-%dT%H:%MZ
} | tee "$work/device.txt"

if wants build; then
  step "build"
  [ -d "$deps/usr" ] || { echo "missing $deps: run bench/gpu/fetch_deps.sh first and carry .deps"; exit 2; }
  zlib_args=()
  if [ ! -e /usr/include/zlib.h ]; then
    zlib_args=(-DZLIB_INCLUDE_DIR="$deps/usr/include" -DZLIB_LIBRARY="$deps/usr/lib/x86_64-linux-gnu/libz.a")
  fi
  cmake -S "$root" -B "$root/build-gpu" -DCMAKE_BUILD_TYPE=Release -DTRAINBENCH_GUI=OFF \
    -DTRAINBENCH_TESTS=OFF -DTRAINBENCH_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DCMAKE_PREFIX_PATH="$deps/usr" -DEigen3_DIR="$deps/usr/share/eigen3/cmake" \
    ${zlib_args[@]+"${zlib_args[@]}"} > "$work/configure.log" 2>&1 || { tail -30 "$work/configure.log"; exit 1; }
  cmake --build "$root/build-gpu" --target trainbench-cli -j"$jobs" > "$work/build.log" 2>&1 \
    || { grep -E "error" "$work/build.log" | head -30; exit 1; }
  echo "built $cli"
fi
[ -x "$cli" ] || { echo "no $cli: run the build stage first"; exit 1; }
"$cli" devices 2>&1 | tee "$work/devices.txt" || true

if [ -d "$deps/fashion-mnist" ]; then
  data="idx:$deps/fashion-mnist"
else
  # Random IDX files of Fashion-MNIST's shape: speed does not depend on the pixel values.
  if [ ! -e "$work/random-idx/t10k-labels-idx1-ubyte" ]; then
    mkdir -p "$work/random-idx"
    "$python" - "$work/random-idx" <<'PY'
import os, struct, sys, random
d = sys.argv[1]
random.seed(0)
for prefix, n in (("train", 60000), ("t10k", 10000)):
    with open(os.path.join(d, f"{prefix}-images-idx3-ubyte"), "wb") as f:
        f.write(struct.pack(">IIII", 0x803, n, 28, 28)); f.write(os.urandom(n * 784))
    with open(os.path.join(d, f"{prefix}-labels-idx1-ubyte"), "wb") as f:
        f.write(struct.pack(">II", 0x801, n)); f.write(bytes(random.randrange(10) for _ in range(n)))
PY
  fi
  data="idx:$work/random-idx"
fi
echo "data: $data"

train() {  # train NAME FLAGS...: one run, metrics and weights under $work/NAME.*
  local name="$1"; shift
  "$cli" train --dataset "$data" --no-shuffle --seed 1 --quiet \
    --metrics-out "$work/$name.csv" --save-weights "$work/$name.safetensors" "$@" > "$work/$name.log" 2>&1
  local status=$?
  [ $status -eq 0 ] || { echo "run $name failed ($status):"; tail -5 "$work/$name.log"; }
  return $status
}
compare() {  # compare LABEL REFERENCE CANDIDATE LOSS_TOL WEIGHT_TOL
  local line
  line="$("$python" "$here/compare_runs.py" --label "$1" --reference "$work/$2" --candidate "$work/$3" \
    --loss-tol "$4" --weight-tol "$5" --json-out "$work/check_$3.json" 2>&1)"
  record "$line"
}

if wants check; then
  step "correctness: CUDA vs CPU"
  : > "$work/checks.txt"  # a new round of checks replaces the last one's lines
  small=(--hidden 256,256 --batch-size 256 --step-size 2 --max-steps 50 --optimizer adam --lr 1e-3)
  train cpu_fp32 "${small[@]}" --device cpu --precision fp32 --threads "$jobs"
  train cuda_fp32 "${small[@]}" --device cuda --precision fp32
  compare "fp32 CUDA vs CPU (adam, 50 updates)" cpu_fp32 cuda_fp32 1e-4 1e-4
  sgd=(--hidden 256,256 --batch-size 256 --step-size 2 --max-steps 50 --optimizer sgd --lr 0.05 --momentum 0.9 --activation gelu)
  train cpu_fp32_sgd "${sgd[@]}" --device cpu --precision fp32 --threads "$jobs"
  train cuda_fp32_sgd "${sgd[@]}" --device cuda --precision fp32
  compare "fp32 CUDA vs CPU (sgd momentum, gelu, 50 updates)" cpu_fp32_sgd cuda_fp32_sgd 1e-4 1e-4
  # Mixed precision against fp32 on the CPU. Tolerances (also in tests/core/test_cuda_engine.cpp):
  # bf16 keeps 8 significant bits, fp16 11; over 50 updates the losses stay within 2% (bf16) and
  # 1% (fp16), the weights within 2% and 0.5%.
  train cuda_bf16 "${small[@]}" --device cuda --precision bf16
  compare "bf16 CUDA vs fp32 CPU (tolerance 2e-2)" cpu_fp32 cuda_bf16 2e-2 2e-2
  train cuda_fp16 "${small[@]}" --device cuda --precision fp16
  compare "fp16 CUDA vs fp32 CPU (tolerance 1e-2 / 5e-3)" cpu_fp32 cuda_fp16 1e-2 5e-3

  step "accumulation and preloading on the GPU"
  accumulate=(--hidden 256,256 --batch-size 240 --max-steps 50 --optimizer sgd --lr 0.05 --momentum 0.9 --device cuda)
  train cuda_step1 "${accumulate[@]}" --step-size 1
  train cuda_step4 "${accumulate[@]}" --step-size 4
  compare "accumulation on CUDA: step_size 4 vs 1 (fp32)" cuda_step1 cuda_step4 1e-5 1e-5
  train cuda_preload "${small[@]}" --device cuda --precision fp32 --preload-device
  compare "--preload-device vs per-micro-batch copies (fp32)" cuda_fp32 cuda_preload 1e-6 1e-6
fi

if wants sanitize; then
  step "compute-sanitizer"
  if command -v compute-sanitizer > /dev/null; then
    for tool in memcheck racecheck; do
      compute-sanitizer --tool "$tool" --error-exitcode 9 "$cli" train --dataset "$data" --hidden 64,64 \
        --batch-size 128 --step-size 2 --max-steps 3 --device cuda --precision bf16 --preload-device \
        --quiet > "$work/sanitizer_$tool.log" 2>&1
      status=$?
      summary="$(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$work/sanitizer_$tool.log" | tail -1)"
      if [ $status -eq 0 ]; then record "PASS compute-sanitizer $tool: ${summary:-clean}"
      else record "FAIL compute-sanitizer $tool (exit $status): ${summary:-see sanitizer_$tool.log}"; fi
    done
  else
    record "SKIP compute-sanitizer: not on PATH"
  fi
fi

if wants speed; then
  step "speed: trainbench"
  speed=(--hidden 4096,4096,4096 --batch-size 4096 --step-size 1 --max-steps 30 --optimizer sgd --lr 0.01
         --device cuda --preload-device --prefetch 2)
  for precision in fp32 bf16 fp16; do
    "$cli" train --dataset "$data" --no-shuffle --seed 1 --quiet "${speed[@]}" --precision "$precision" \
      --metrics-out "$work/speed_$precision.csv" > "$work/speed_$precision.log" 2>&1 \
      || { echo "speed run $precision failed:"; tail -5 "$work/speed_$precision.log"; }
  done
fi

if wants torch; then
  step "speed: PyTorch"
  compile_flag=()
  [ "${TORCH_COMPILE:-1}" = "0" ] && compile_flag=(--no-compile)
  "$python" "$here/torch_mlp_bench.py" --out "$work/torch.json" ${compile_flag[@]+"${compile_flag[@]}"} 2>&1 \
    | tee "$work/torch.log"
fi

if wants summary; then
  step "summary"
  "$python" "$here/summarize.py" --out "$work"
fi

# What comes back from the device machine: a handful of files (see the header).
if [ -n "${OUT:-}" ]; then
  for f in results.md results.json checks.txt device.txt torch.json; do
    [ -e "$work/$f" ] && cp "$work/$f" "$OUT/"
  done
  (cd "$work" && tar czf "$OUT/logs.tar.gz" --exclude='*.safetensors' --exclude='random-idx' \
    --exclude='*.tar.gz' .) || true
fi
