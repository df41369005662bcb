#!/usr/bin/env bash
# Everything the CUDA engine must show, in one run on a lent GPU machine (nvcc, CMake, PyTorch;
# no Qt, no network). Before, on a networked machine: bench/gpu/fetch_deps.sh (fills .deps/).
#   1. builds trainbench_core + trainbench-cli with CUDA (no GUI, no tests: they need Qt)
#   2. correctness: fp32 CUDA vs CPU over 50 updates (losses and final weights < 1e-4 rel.),
#      bf16/fp16 vs CPU fp32 within the documented tolerance, accumulation (step_size 4 vs 1)
#      on the GPU, --preload-device vs per-micro-batch copies, compute-sanitizer on a short run
#   3. speed: 784-4096-4096-4096-10, batch 4096, fp32/bf16/fp16 against PyTorch eager (and
#      torch.compile) on the same GPU, TFLOP/s against the measured bf16 GEMM peak
# Results go to $OUT (or out/gpu); the table printed last is also OUT/results.md.
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
here="$root/bench/gpu"
deps="$root/.deps"
out="${OUT:-$root/out/gpu}"
mkdir -p "$out"
: > "$out/checks.txt"
jobs="$(nproc)"
python="$(command -v python3)"

step() { printf '\n=== %s\n' "$*"; }
record() { echo "$*" | tee -a "$out/checks.txt"; }

step "device"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/device.txt"
nvcc --version | tail -1 | tee -a "$out/device.txt"
date -u +%Y-%m-%dT%H:%MZ | tee -a "$out/device.txt"

step "build"
[ -d "$deps/usr" ] || { echo "missing $deps: run bench/gpu/fetch_deps.sh on a networked machine first"; exit 2; }
zlib_args=()
if [ ! -e /usr/include/zlib.h ]; then
  zlib_args=(-DZLIB_INCLUDE_DIR="$deps/usr/include" -DZLIB_LIBRARY="$deps/usr/lib/x86_64-linux-gnu/libz.a")
fi
cmake -S "$root" -B "$root/build-gpu" -DCMAKE_BUILD_TYPE=Release -DTRAINBENCH_GUI=OFF \
  -DTRAINBENCH_TESTS=OFF -DTRAINBENCH_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DCMAKE_PREFIX_PATH="$deps/usr" -DEigen3_DIR="$deps/usr/share/eigen3/cmake" \
  "${zlib_args[@]}" > "$out/configure.log" 2>&1 || { tail -30 "$out/configure.log"; exit 1; }
cmake --build "$root/build-gpu" --target trainbench-cli -j"$jobs" > "$out/build.log" 2>&1 \
  || { grep -E "error" "$out/build.log" | head -30; exit 1; }
cli="$(find "$root/build-gpu" -name trainbench-cli -type f -perm -u+x | head -1)"
echo "built $cli"
"$cli" devices 2>&1 | tee "$out/devices.txt" || true

if [ -d "$deps/fashion-mnist" ]; then
  data="idx:$deps/fashion-mnist"
else
  # Random IDX files of Fashion-MNIST's shape: speed does not depend on the pixel values.
  mkdir -p "$out/random-idx"
  "$python" - "$out/random-idx" <<'PY'
import os, struct, sys, random
d = sys.argv[1]
random.seed(0)
for prefix, n in (("train", 60000), ("t10k", 10000)):
    with open(os.path.join(d, f"{prefix}-images-idx3-ubyte"), "wb") as f:
        f.write(struct.pack(">IIII", 0x803, n, 28, 28)); f.write(os.urandom(n * 784))
    with open(os.path.join(d, f"{prefix}-labels-idx1-ubyte"), "wb") as f:
        f.write(struct.pack(">II", 0x801, n)); f.write(bytes(random.randrange(10) for _ in range(n)))
PY
  data="idx:$out/random-idx"
fi
echo "data: $data"

train() {  # train NAME FLAGS...: one run, metrics and weights under $out/NAME.*
  local name="$1"; shift
  "$cli" train --dataset "$data" --no-shuffle --seed 1 --quiet \
    --metrics-out "$out/$name.csv" --save-weights "$out/$name.safetensors" "$@" > "$out/$name.log" 2>&1
  local status=$?
  [ $status -eq 0 ] || { echo "run $name failed ($status):"; tail -5 "$out/$name.log"; }
  return $status
}
compare() {  # compare LABEL REFERENCE CANDIDATE LOSS_TOL WEIGHT_TOL
  local line
  line="$("$python" "$here/compare_runs.py" --label "$1" --reference "$out/$2" --candidate "$out/$3" \
    --loss-tol "$4" --weight-tol "$5" --json-out "$out/check_$3.json" 2>&1)"
  record "$line"
}

step "correctness: CUDA vs CPU"
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

step "compute-sanitizer"
if command -v compute-sanitizer > /dev/null; then
  for tool in memcheck racecheck; do
    compute-sanitizer --tool "$tool" --error-exitcode 9 "$cli" train --dataset "$data" --hidden 64,64 \
      --batch-size 128 --step-size 2 --max-steps 3 --device cuda --precision bf16 --preload-device \
      --quiet > "$out/sanitizer_$tool.log" 2>&1
    status=$?
    summary="$(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$out/sanitizer_$tool.log" | tail -1)"
    if [ $status -eq 0 ]; then record "PASS compute-sanitizer $tool: ${summary:-clean}"
    else record "FAIL compute-sanitizer $tool (exit $status): ${summary:-see sanitizer_$tool.log}"; fi
  done
else
  record "SKIP compute-sanitizer: not on PATH"
fi

step "speed: trainbench"
speed=(--hidden 4096,4096,4096 --batch-size 4096 --step-size 1 --max-steps 30 --optimizer sgd --lr 0.01
       --device cuda --preload-device --prefetch 2 --val-fraction 0)
for precision in fp32 bf16 fp16; do
  "$cli" train --dataset "$data" --no-shuffle --seed 1 --quiet "${speed[@]}" --precision "$precision" \
    --metrics-out "$out/speed_$precision.csv" > "$out/speed_$precision.log" 2>&1 \
    || { echo "speed run $precision failed:"; tail -5 "$out/speed_$precision.log"; }
done

step "speed: PyTorch"
"$python" "$here/torch_mlp_bench.py" --out "$out/torch.json" 2>&1 | tee "$out/torch.log"

step "summary"
"$python" "$here/summarize.py" --out "$out"
