#!/usr/bin/env bash
# Everything the CUDA engine must show, on a lent GPU machine (nvcc, CMake, PyTorch; no Qt, no
# network). Before, on a networked Debian machine: bench/gpu/fetch_deps.sh fills .deps/ (Debian
# packages as .deb files, and Fashion-MNIST), which is git-ignored, so the device tool must be
# told to take it along: run with carry [".deps"].
#   build     unpack .deps, build trainbench-cli, the CUDA products benchmark and the Qt Test
#             suite of the CUDA engine (-DTRAINBENCH_GUI=OFF); oneDNN comes from .deps too
#             (first needed 2026-11-26, not yet built on a GPU machine)
#   tests     tests/core/test_cuda_engine.cpp on the GPU (CUDA vs CPU engine for every
#             optimizer, activation and loss; mixed precision; accumulation; preload;
#             checkpointing; the memory plan against the allocator)
#   gpt       tests/core/test_cuda_graph_engine.cpp on the GPU: GPTs (L2 H4; T 16 with the
#             fixtures, T 13, T 70, odd widths) on the CUDA graph executor vs the CPU one (loss,
#             every gradient, evaluation, 10 AdamW updates), MLPs on it too, checkpointing and
#             reruns bit-identical, accumulation, plan == allocation; bf16/fp16 against the CPU
#             executor's own 16-bit runs (closer to them than 16 bits lie to fp32)
#   gptcheck  a GPT through the CLI on text made from this repository's docs (L2 H4 C64 T64,
#             batch 16, 30 AdamW updates, fp32): CUDA vs CPU (losses and final weights < 1e-4
#             rel.), --fused off vs on on CUDA (< 1e-4), checkpointing vs not on CUDA
#             (identical bits), step_size 4 vs 1 (< 1e-5);
#             bf16 on CUDA against the CPU's bf16 (within 2x the CPU bf16 run's distance from
#             fp32), and checkpointing in bf16 (identical bits)
#   check     whole runs through the CLI: fp32 CUDA vs CPU over 50 updates (losses and final
#             weights < 1e-4 rel.), bf16/fp16 against the CPU engine's own 16-bit and fp32
#             runs, accumulation, preload, checkpointing, a checkpoint resumed on the GPU and
#             on the CPU, epochs with partial batches and validation, identical bits from
#             identical runs; with ReLU and RELU_DETAIL=1, single updates from the same
#             checkpoint (information, about 25 more runs)
#   sanitize  compute-sanitizer memcheck, racecheck, initcheck, synccheck on short runs
#   products  the engine's own cuBLASLt products: 8192^3 and one MLP update's products
#   speed     784-4096-4096-4096-10, batch 4096, fp32/bf16/fp16 (trainbench), with the memory
#             plan, the allocator's figures and cudaMemGetInfo
#   gptspeed  GPT L6 H6 C384 T256 (nanoGPT's shakespeare_char), batch 64, fp32 and bf16
#             (GPT_SPEED_PRECISIONS), 30 updates (GPT_SPEED_UPDATES): trainbench against
#             bench/torch_gpt_throughput.py, PyTorch eager and torch.compile (unless
#             TORCH_COMPILE=0; bf16 is autocast), on the same text and GPU; and trainbench's
#             own --fused off run beside its fused one
#   gpt2speed the same for GPT-2 small's shape (L12 H12 C768 T1024, batch 8) on the byte
#             vocabulary, bf16 (GPT2_SPEED_PRECISIONS), 20 updates (GPT2_SPEED_UPDATES); written
#             2026-11-27, not yet run on a GPU
#   plan      trainbench-cli plan --device cuda (issue 35) against the GPU: the gptspeed GPT in
#             fp32 and bf16, with and without checkpointing, planned and then run 3 updates;
#             the plan must equal the allocator's live peak to the byte. The CUDA context this
#             GPU holds (cudaMemGetInfo's used minus the allocator's reserved bytes) is reported
#             beside the 608 MiB the plan adds. PLAN_DEVICE=cpu runs the same check on the CPU.
#   profile   ncu's time per kernel over two updates of the gptspeed GPT (PROFILE_PRECISIONS,
#             default bf16), summed by kernel (kernel_times.py)
#   techniques  trainbench-cli compare --device cuda on a model of that size
#   torch     the same in PyTorch eager (and torch.compile unless TORCH_COMPILE=0), its memory,
#             and the measured bf16 GEMM peak
#   summary   the tables and the checks
# Usage: bench/gpu/run.sh [STAGE...]   (no stage: all of them, in this order). One device call
# may run at most 10 minutes; a machine goes back 30 s after a call, so each call should name
# `build` (86 s on 16 cores on 2026-11-27) with the stages it wants; every stage together takes
# more than one call (about 8 minutes without techniques, torch and gpt2speed).
# Bulky files (logs, CSVs, weights, generated data) stay in out/gpu; $OUT, which brings at most
# 8 files back, receives results.md, results.json, checks.txt, information.txt, device.txt,
# techniques_cuda.md and logs.tar.gz.
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
here="$root/bench/gpu"
deps="$root/.deps"
prefix="${TRAINBENCH_DEPS_PREFIX:-/tmp/trainbench-deps}"  # where the .deb files are unpacked
work="$root/out/gpu"
build="$root/build-gpu"
mkdir -p "$work"
jobs="$(nproc)"
python="$(command -v python3)"
cli="$build/app/trainbench-cli"

stages=("$@")
[ ${#stages[@]} -gt 0 ] || stages=(build tests gpt gptcheck check sanitize products speed gptspeed gpt2speed plan profile techniques torch summary)
wants() { local s; for s in "${stages[@]}"; do [ "$s" = "$1" ] && return 0; done; return 1; }
# A call that builds starts a new round of checks; later calls on the same machine add to it.
if wants build; then : > "$work/checks.txt"; : > "$work/information.txt"; else touch "$work/checks.txt" "$work/information.txt"; fi

# What comes back from the device machine: a handful of files (see the header). Delivered after
# every stage, so a call that runs past its time limit still brings back what it checked.
deliver() {
  [ -n "${OUT:-}" ] || return 0
  local f
  for f in results.md results.json checks.txt information.txt device.txt techniques_cuda.md; do
    [ -e "$work/$f" ] && cp "$work/$f" "$OUT/"
  done
  (cd "$work" && tar czf "$OUT/logs.tar.gz" --exclude='*.safetensors' --exclude='random-idx' \
    --exclude='relu_checkpoint_*' --exclude='resume_checkpoints' --exclude='gpt_text*' --exclude='*.tar.gz' .) || true
}
step() { deliver; printf '\n=== %s (%s)\n' "$*" "$(date -u +%H:%M:%S)"; }
record() {  # one PASS or FAIL line, brought back at once (a call cut short keeps it)
  echo "$*" | tee -a "$work/checks.txt"
  [ -z "${OUT:-}" ] || cp "$work/checks.txt" "$OUT/"
}
# Debian's libraries that this system lacks (and only those) for the Qt tools and tests.
with_deps_libs() { LD_LIBRARY_PATH="$prefix/missing-libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$@"; }

unpack_deps() {
  ls "$deps"/debs/*.deb > /dev/null 2>&1 || { echo "missing $deps/debs: run bench/gpu/fetch_deps.sh first and carry .deps"; return 1; }
  # Unpacked once per set of packages (the marker lists them).
  [ "$(cat "$prefix/.unpacked" 2>/dev/null)" = "$(ls "$deps/debs")" ] && return 0
  rm -rf "$prefix"
  mkdir -p "$prefix/missing-libs"
  local deb lib name
  for deb in "$deps"/debs/*.deb; do
    if command -v dpkg > /dev/null; then
      dpkg -x "$deb" "$prefix" || return 1
    else  # a .deb is an ar archive holding data.tar.*
      (cd "$prefix" && ar p "$deb" "$(ar t "$deb" | grep '^data\.tar')" | tar -x) || return 1
    fi
  done
  # A newer system library must win over Debian 12's copy, so only missing ones are linked.
  for lib in "$prefix"/usr/lib/x86_64-linux-gnu/*.so.* "$prefix"/lib/x86_64-linux-gnu/*.so.*; do
    name="$(basename "$lib")"
    [[ "$name" =~ \.so\.[0-9]+$ ]] || continue
    ldconfig -p | grep -q "^[[:space:]]*$name " || ln -sf "$lib" "$prefix/missing-libs/$name"
  done
  ls "$deps/debs" > "$prefix/.unpacked"
}

step "device"
{
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader
  nvcc --version | tail -1
  echo "torch $("$python" -c 'import torch; print(torch.__version__, "CUDA", torch.version.cuda)' 2>&1)"
  echo "host: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
  date -u +%Y-%m-%dT%H:%MZ
} | tee "$work/device.txt"

if wants build; then
  step "build"
  unpack_deps || exit 2
  zlib_args=()
  if [ ! -e /usr/include/zlib.h ]; then
    zlib_args=(-DZLIB_INCLUDE_DIR="$prefix/usr/include" -DZLIB_LIBRARY="$prefix/usr/lib/x86_64-linux-gnu/libz.a")
  fi
  targets=(trainbench-cli cuda_products)
  tests_flag=OFF
  if [ -d "$prefix/usr/lib/x86_64-linux-gnu/cmake/Qt6Test" ]; then
    tests_flag=ON
    targets+=(core_test_backend_ops core_test_cuda_engine core_test_cuda_graph_engine)
  fi
  with_deps_libs cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DTRAINBENCH_GUI=OFF \
    -DTRAINBENCH_TESTS="$tests_flag" -DTRAINBENCH_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DCMAKE_PREFIX_PATH="$prefix/usr" -DEigen3_DIR="$prefix/usr/share/eigen3/cmake" \
    ${zlib_args[@]+"${zlib_args[@]}"} > "$work/configure.log" 2>&1 || { tail -30 "$work/configure.log"; exit 1; }
  with_deps_libs cmake --build "$build" --target "${targets[@]}" -j"$jobs" > "$work/build.log" 2>&1 \
    || { grep -E "error|Error" "$work/build.log" | head -30; exit 1; }
  echo "built: ${targets[*]}"
fi
[ -x "$cli" ] || { echo "no $cli: run the build stage first"; exit 1; }
# The engine links oneDNN (libdnnl.so.2), which this system may lack: every program run below
# finds the unpacked Debian copy, and only the libraries the system lacks (see unpack_deps).
[ -d "$prefix/missing-libs" ] && export LD_LIBRARY_PATH="$prefix/missing-libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
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
  local dataset=(--dataset "$data")
  [[ " $* " == *" --dataset "* ]] && dataset=()  # the run names its own
  "$cli" train ${dataset[@]+"${dataset[@]}"} --no-shuffle --seed 1 --quiet \
    --metrics-out "$work/$name.csv" --save-weights "$work/$name.safetensors" "$@" > "$work/$name.log" 2>&1
  local status=$?
  [ $status -eq 0 ] || { record "FAIL run $name (exit $status): $(tail -1 "$work/$name.log")"; }
  return $status
}
# compare LABEL REFERENCE CANDIDATE (LOSS_TOL WEIGHT_TOL | exact | --calibration A B --factor F)
compare_line() {
  local label="$1" reference="$2" candidate="$3"; shift 3
  local tolerance=("$@")
  case "${1:-}" in
    exact) tolerance=(--exact) ;;
    --*) ;;
    *) tolerance=(--loss-tol "${1:-0}" --weight-tol "${2:-0}") ;;
  esac
  [ -e "$work/$reference.csv" ] && [ -e "$work/$candidate.csv" ] || { echo "FAIL $label: a run it needs failed"; return; }
  "$python" "$here/compare_runs.py" --label "$label" --reference "$work/$reference" --candidate "$work/$candidate" \
    "${tolerance[@]}" --json-out "$work/check_$candidate.json" 2>&1
}
compare() { record "$(compare_line "$@")"; }
report() { echo "$*" | tee -a "$work/information.txt"; }  # measured, neither pass nor fail
# The GPT stages' text: the GPU machine has no network and no KJV, so this repository's own
# documentation (about 70 KB; the byte vocabulary of whatever it holds). gpt_text_x10.txt repeats
# it ten times, so that gptspeed's 30 updates of 64 windows of 257 tokens stay in one epoch.
gpt_text() {
  cat "$root/README.md" "$root"/docs/*.md > "$work/gpt_text.txt"
  for _ in 1 2 3 4 5 6 7 8 9 10; do cat "$work/gpt_text.txt"; done > "$work/gpt_text_x10.txt"
}

# qt_suite NAME TITLE SHOWN GREP_FLAGS...: runs tests/core/NAME.cpp's executable on the GPU, shows
# the first SHOWN lines of its failures, skips and measurements, and records one PASS or FAIL
# (a skip counts as a failure here: on this machine every check must run).
qt_suite() {
  local name="$1" title="$2" shown="$3"; shift 3
  local suite="$build/tests/core_$name" log="$work/$name.txt" status totals
  if [ ! -x "$suite" ]; then
    record "FAIL Qt Test suite core/$name: not built (no Qt 6 Test in .deps)"
    return
  fi
  with_deps_libs "$suite" -o "$log,txt" > /dev/null 2>&1
  status=$?
  totals="$(grep -E "^Totals:" "$log")"
  grep -E "^(FAIL|SKIP|QINFO)" "$@" "$log" | head -"$shown"
  if [ $status -eq 0 ] && ! grep -q "^SKIP" "$log"; then
    record "PASS Qt Test suite $title on the GPU: $totals"
  else
    record "FAIL Qt Test suite $title on the GPU (exit $status, skips count as failures here): $totals"
  fi
}

if wants tests; then
  # Every op kind alone, CUDA against the CPU, first: a kernel written blind is found here by name.
  step "tests: tests/core/test_backend_ops.cpp, then tests/core/test_cuda_engine.cpp on the GPU"
  qt_suite test_backend_ops "core/test_backend_ops (each op, CUDA vs CPU)" 40 -A0
  qt_suite test_cuda_engine "core/test_cuda_engine" 20
fi

if wants gpt; then
  step "gpt: tests/core/test_cuda_graph_engine.cpp on the GPU"
  qt_suite test_cuda_graph_engine "core/test_cuda_graph_engine (GPT)" 40 -A1
fi

if wants gptcheck; then
  step "gptcheck: a GPT through the CLI, CUDA vs CPU"
  gpt_text
  # The GPT recipe's defaults (AdamW with nanoGPT's groups, betas 0.9/0.95, weight decay 0.1,
  # clip 1.0, warmup and cosine lr), validation every 10 updates so that compare_runs.py also
  # checks the evaluation path.
  gpt=(--model gpt --dataset "text:$work/gpt_text.txt" --n-layer 2 --n-head 4 --n-embd 64 --block-size 64
       --batch-size 16 --max-steps 30 --precision fp32 --eval-every 10 --eval-samples 64)
  train gpt_cpu "${gpt[@]}" --step-size 2 --device cpu --threads "$jobs"
  train gpt_cuda "${gpt[@]}" --step-size 2 --device cuda
  compare "GPT L2 H4 C64 T64 fp32 CUDA vs CPU (AdamW, step_size 2, 30 updates)" gpt_cpu gpt_cuda 1e-4 1e-4
  # --fused off: eager attention, loss and optimizer kernels (eager_kernels.cu) against the fused ones.
  train gpt_cuda_eager "${gpt[@]}" --step-size 2 --device cuda --fused off
  compare "GPT --fused off vs on on CUDA (eager attention, loss and AdamW kernels)" gpt_cuda gpt_cuda_eager 1e-4 1e-4
  train gpt_cuda_checkpointed "${gpt[@]}" --step-size 2 --device cuda --gradient-checkpointing
  compare "GPT --gradient-checkpointing vs keeping activations on CUDA (identical bits)" \
    gpt_cuda gpt_cuda_checkpointed exact
  train gpt_cuda_step1 "${gpt[@]}" --step-size 1 --device cuda
  train gpt_cuda_step4 "${gpt[@]}" --step-size 4 --device cuda
  compare "GPT accumulation on CUDA: step_size 4 vs 1 (fp32)" gpt_cuda_step1 gpt_cuda_step4 1e-5 1e-5
  # Mixed precision: both engines round at the same points (test_cuda_graph_engine shows one
  # micro-batch's gradients agreeing to 1e-7 where bf16 moves them 8e-3 from fp32). Over 30 AdamW
  # updates the rare value rounded to the neighbouring bf16 code on one engine grows as any
  # rounding difference does (Adam turns tiny gradients into full steps), so the two bf16 runs
  # part about as far as bf16 and fp32 do: within 2x that distance, as for the MLP below.
  train gpt_cpu_bf16 "${gpt[@]}" --step-size 2 --device cpu --threads "$jobs" --precision bf16
  train gpt_cuda_bf16 "${gpt[@]}" --step-size 2 --device cuda --precision bf16
  compare "GPT bf16 CUDA vs CPU bf16 (within 2x CPU bf16's own distance from fp32)" gpt_cpu_bf16 gpt_cuda_bf16 \
    --calibration "$work/gpt_cpu" "$work/gpt_cpu_bf16" --factor 2
  train gpt_cuda_bf16_checkpointed "${gpt[@]}" --step-size 2 --device cuda --precision bf16 --gradient-checkpointing
  compare "GPT bf16 --gradient-checkpointing vs keeping activations on CUDA (identical bits)" \
    gpt_cuda_bf16 gpt_cuda_bf16_checkpointed exact
fi

if wants check; then
  step "correctness: CUDA vs CPU"
  # Long comparisons use smooth activations: with ReLU, a pre-activation that float rounding
  # puts on the other side of zero switches one (unit, sample) term of the gradient on or off,
  # and two correct engines then part ways (shown below, as information, one update at a time).
  model=(--hidden 256,256 --batch-size 256 --step-size 2 --optimizer adam --lr 1e-3 --activation gelu)
  small=("${model[@]}" --max-steps 50)
  train cpu_fp32 "${small[@]}" --device cpu --precision fp32 --threads "$jobs"
  train cuda_fp32 "${small[@]}" --device cuda --precision fp32
  compare "fp32 CUDA vs CPU (adam, gelu, 50 updates)" cpu_fp32 cuda_fp32 1e-4 1e-4
  sgd=(--hidden 256,256 --batch-size 256 --step-size 2 --max-steps 50 --optimizer sgd --lr 0.05 --momentum 0.9
       --activation gelu --clip-grad-norm 0.5)
  train cpu_fp32_sgd "${sgd[@]}" --device cpu --precision fp32 --threads "$jobs"
  train cuda_fp32_sgd "${sgd[@]}" --device cuda --precision fp32
  compare "fp32 CUDA vs CPU (sgd momentum, gelu, clipping, 50 updates)" cpu_fp32_sgd cuda_fp32_sgd 1e-4 1e-4
  # Whole epochs of a small set: partial last batches (4000 train rows, batch 384), the
  # validation pass after each epoch, a cosine schedule with warmup, AdamW.
  epochs=(--dataset spirals --samples 4000 --hidden 64,64 --batch-size 384 --step-size 3 --epochs 3
          --optimizer adamw --lr 3e-3 --schedule cosine --warmup-steps 5 --activation tanh)
  train cpu_epochs "${epochs[@]}" --device cpu --threads "$jobs"
  train cuda_epochs "${epochs[@]}" --device cuda
  compare "fp32 CUDA vs CPU (spirals, 3 epochs with partial batches and validation, adamw, cosine)" \
    cpu_epochs cuda_epochs 1e-4 1e-4

  step "mixed precision: CUDA against the CPU engine's own bf16/fp16 and fp32"
  # A 16-bit run's distance d from fp32 is what mixed precision costs; the CPU engine's 16-bit
  # run measures it on the same trajectory, so the tolerances are multiples of d. The CPU and
  # CUDA 16-bit runs round differently (products widened to fp32 vs tensor cores; CUDA stores
  # dX in 16 bits before the activation's derivative), two independent roundings of one fp32
  # trajectory, which lie about sqrt(2) d apart: hence 2 d between them (measured: 0.7-1.4 d).
  for precision in bf16 fp16; do
    train "cpu_$precision" "${small[@]}" --device cpu --threads "$jobs" --precision "$precision"
    train "cuda_$precision" "${small[@]}" --device cuda --precision "$precision"
    compare "$precision CUDA vs CPU fp32 (within 1.5x CPU $precision's own distance from fp32)" \
      cpu_fp32 "cuda_$precision" --calibration "$work/cpu_fp32" "$work/cpu_$precision" --factor 1.5
    compare "$precision CUDA vs $precision CPU (within 2x CPU $precision's distance from fp32)" \
      "cpu_$precision" "cuda_$precision" --calibration "$work/cpu_fp32" "$work/cpu_$precision" --factor 2
  done

  # Information only, and about 25 runs: where two correct engines part with ReLU (RELU_DETAIL=1).
  if [ "${RELU_DETAIL:-0}" = 1 ]; then
    step "ReLU: one update from the same CPU checkpoint on each engine"
    relu=(--hidden 256,256 --batch-size 256 --step-size 2 --optimizer adam --lr 1e-3 --activation relu)
    train cpu_relu "${relu[@]}" --max-steps 50 --device cpu --threads "$jobs"
    train cuda_relu "${relu[@]}" --max-steps 50 --device cuda
    report "$(compare_line "fp32 CUDA vs CPU with relu (adam, 50 updates), for information" cpu_relu cuda_relu 1e-4 1e-4 \
             | sed 's/^\(PASS\|FAIL\)/INFO/')"
    # one_update_from SOURCE UPDATE: SOURCE (cpu|cuda) trains to UPDATE and checkpoints; each
    # engine then takes update UPDATE+1 from that state, and locate_difference.py compares them.
    one_update_from() {
      local source="$1" update="$2" device
      local checkpoints="$work/relu_checkpoint_${source}_$update" tag="${source}_$update"
      rm -rf "$checkpoints"
      train "${source}_relu_to_$update" "${relu[@]}" --device "$source" --threads "$jobs" --max-steps "$update" \
        --checkpoint-every "$update" --checkpoint-dir "$checkpoints"
      for device in cpu cuda; do
        train "${device}_relu_step_from_$tag" "${relu[@]}" --device "$device" --max-steps $((update + 1)) \
          --resume "$checkpoints"
      done
      report "$("$python" "$here/locate_difference.py" \
        --label "update $((update + 1)) from the $([ "$source" = cpu ] && echo "CPU" || echo "GPU")'s checkpoint, CUDA vs CPU" \
        --reference "$work/cpu_relu_step_from_$tag.safetensors" \
        --candidate "$work/cuda_relu_step_from_$tag.safetensors" 2>&1)"
    }
    for update in 24 25 26 27 28 29; do one_update_from cpu "$update"; done
    one_update_from cuda 27  # the GPU's own state where the free runs part (update 28)

  fi

  step "accumulation, preloading, checkpointing, resuming on the GPU"
  accumulate=(--hidden 256,256 --batch-size 240 --max-steps 50 --optimizer sgd --lr 0.05 --momentum 0.9
              --activation gelu --device cuda)
  train cuda_step1 "${accumulate[@]}" --step-size 1
  train cuda_step4 "${accumulate[@]}" --step-size 4
  compare "accumulation on CUDA: step_size 4 vs 1 (fp32)" cuda_step1 cuda_step4 1e-5 1e-5
  train cuda_step1_bf16 "${accumulate[@]}" --step-size 1 --precision bf16
  train cuda_step4_bf16 "${accumulate[@]}" --step-size 4 --precision bf16
  compare "accumulation on CUDA: step_size 4 vs 1 (bf16, tolerance 1e-2)" cuda_step1_bf16 cuda_step4_bf16 1e-2 1e-2
  train cuda_preload "${small[@]}" --device cuda --precision fp32 --preload-device
  compare "--preload-device vs per-micro-batch copies (fp32)" cuda_fp32 cuda_preload 1e-6 1e-6
  deep=(--hidden 256,256,256,256,256,256 --batch-size 256 --step-size 2 --max-steps 30 --optimizer adam
        --lr 1e-3 --device cuda --activation gelu)
  train cuda_deep "${deep[@]}"
  train cuda_deep_checkpointed "${deep[@]}" --gradient-checkpointing
  compare "--gradient-checkpointing vs keeping activations (fp32, 6 hidden layers, gelu)" \
    cuda_deep cuda_deep_checkpointed 1e-6 1e-6
  rm -rf "$work/resume_checkpoints"
  train cuda_first_half "${model[@]}" --device cuda --precision fp32 --max-steps 25 \
    --checkpoint-every 25 --checkpoint-dir "$work/resume_checkpoints"
  train cuda_resumed "${small[@]}" --device cuda --precision fp32 --resume "$work/resume_checkpoints"
  compare "checkpoint at update 25 resumed on CUDA vs 50 straight updates (identical bits)" \
    cuda_fp32 cuda_resumed exact
  train cpu_resumed "${small[@]}" --device cpu --threads "$jobs" --precision fp32 --resume "$work/resume_checkpoints"
  compare "checkpoint written on CUDA, resumed on the CPU vs 50 CUDA updates" cuda_fp32 cpu_resumed 1e-4 1e-4

  step "determinism: identical runs, identical bits"
  for precision in fp32 bf16 fp16; do
    train "cuda_${precision}_again" "${small[@]}" --device cuda --precision "$precision"
    compare "two identical $precision CUDA runs" "cuda_$precision" "cuda_${precision}_again" exact
  done
fi

if wants sanitize; then
  step "compute-sanitizer"
  if command -v compute-sanitizer > /dev/null; then
    short=(train --dataset "$data" --max-steps 3 --device cuda --quiet --batch-size 128 --step-size 2)
    # The peak product that MFU divides by, measured once outside the tools (the same precisions
    # as the runs below) and then reused: under memcheck its 4096^3 products alone took minutes.
    for precision in fp32 bf16 fp16; do
      "$cli" "${short[@]}" --hidden 64 --precision "$precision" > /dev/null 2>&1
    done
    export TRAINBENCH_REUSE_PEAK=1
    sanitize_command() {  # sanitize_command TOOL LABEL CLI-ARGUMENTS...
      local tool="$1" label="$2"; shift 2
      local log="$work/sanitizer_${tool}_$label.log"
      compute-sanitizer --tool "$tool" --error-exitcode 9 "$cli" "$@" > "$log" 2>&1
      local status=$? summary ours
      summary="$(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$log" | tail -1)"
      # racecheck reports hazards inside cuBLASLt's own Hopper product kernels (nvjet_sm90_*,
      # asynchronous copies into shared memory the tool does not follow): seen 2026-11-23, 18 in
      # every run, MLP or GPT, all within the engine's peak-product measurement at start (now
      # reused from the cache, TRAINBENCH_REUSE_PEAK). Those are counted apart; a hazard in any
      # other kernel fails. (Excluding them from the tool with
      # --kernel-name-exclude kns=nvjet made compute-sanitizer itself fail: "failed to handle a
      # hardware exception".)
      if [ "$tool" = racecheck ] && [ $status -eq 9 ] && ! grep -q "Sanitizer Error" "$log"; then
        ours="$(grep "Race reported" "$log" | grep -vc "nvjet")"
        if [ "$ours" -eq 0 ]; then
          record "PASS compute-sanitizer racecheck ($label): no hazard in the engine's kernels ($(grep -c "Race reported" "$log") inside cuBLASLt's nvjet kernels)"
          return
        fi
      fi
      if [ $status -eq 0 ]; then record "PASS compute-sanitizer $tool ($label): ${summary:-clean}"
      else record "FAIL compute-sanitizer $tool ($label, exit $status): ${summary:-$(tail -1 "$log")}"; fi
    }
    sanitize() { local tool="$1" label="$2"; shift 2; sanitize_command "$tool" "$label" "${short[@]}" "$@"; }
    bf16_preload=(--hidden 64,64 --precision bf16 --preload-device --optimizer adam)
    fp32_copies=(--hidden 64,64,64,64 --precision fp32 --gradient-checkpointing --activation gelu --optimizer rmsprop)
    fp16_scaled=(--hidden 64,64 --precision fp16 --optimizer sgd --momentum 0.9 --clip-grad-norm 1)
    # The executor: a GPT in bf16 with checkpointing, accumulation, evaluation and text samples;
    # head size 16 and T 64, so its attention runs in the tile kernels (attention_in_tile_kernels).
    gpt_text
    gpt_short=(train --model gpt --dataset "text:$work/gpt_text.txt" --n-layer 2 --n-head 4 --n-embd 64 --block-size 64
               --batch-size 8 --step-size 2 --max-steps 2 --device cuda --quiet --eval-every 1 --eval-samples 16
               --sample-chars 16 --gradient-checkpointing)
    sanitize_command memcheck gpt-bf16 "${gpt_short[@]}" --precision bf16
    sanitize_command racecheck gpt-fp16 "${gpt_short[@]}" --precision fp16
    # MLPs: preloading, checkpointing, the fp16 loss scaler.
    sanitize memcheck bf16-preload "${bf16_preload[@]}"
    sanitize memcheck fp32-checkpointing "${fp32_copies[@]}"
    sanitize memcheck fp16 "${fp16_scaled[@]}"
    sanitize racecheck bf16-preload "${bf16_preload[@]}"
    sanitize initcheck fp32-checkpointing "${fp32_copies[@]}"
    sanitize synccheck bf16-preload "${bf16_preload[@]}"
    unset TRAINBENCH_REUSE_PEAK
  else
    record "FAIL compute-sanitizer: not on PATH"
  fi
fi

if wants products; then
  step "products: the engine's cuBLASLt products"
  "$build/bench/cuda_products" --out "$work/products.json" 2>&1 | tee "$work/products.txt"
fi

if wants speed; then
  step "speed: trainbench"
  speed=(--hidden 4096,4096,4096 --batch-size 4096 --max-steps 40 --optimizer sgd --lr 0.01
         --device cuda --preload-device --prefetch 2)
  # name precision step_size: the three precisions, and what accumulation costs in bf16.
  for run in "fp32 fp32 1" "bf16 bf16 1" "fp16 fp16 1" "bf16_step4 bf16 4"; do
    read -r name precision step_size <<< "$run"
    "$cli" train --dataset "$data" --no-shuffle --seed 1 "${speed[@]}" --precision "$precision" \
      --step-size "$step_size" --metrics-out "$work/speed_$name.csv" > "$work/speed_$name.log" 2>&1 \
      || record "FAIL speed run $name: $(tail -1 "$work/speed_$name.log")"
    grep -E "^(memory plan|peak memory)" "$work/speed_$name.log" | sed "s/^/$name: /"
  done
fi

# gpt_speed_stage STAGE UPDATES PRECISIONS SHAPE-FLAGS...: trainbench (--fused on and off) against
# PyTorch eager and torch.compile on one GPT shape, files $work/STAGE_*, one line each precision.
gpt_speed_stage() {
  local stage="$1" updates="$2" precisions="$3"; shift 3
  local shape=("$@") data="text:$work/gpt_text_x10.txt" precision variant
  rm -f "$work/${stage}"_*  # an earlier call's figures (e.g. torch.compile's) must not show as this one's
  gpt_text
  for precision in $precisions; do
    for variant in on off; do
      local name="${stage}_trainbench_$precision"
      [ "$variant" = off ] && name="${stage}_trainbench_eager_$precision"
      "$cli" train --model gpt --dataset "$data" "${shape[@]}" --optimizer adamw --lr 1e-3 \
        --schedule constant --warmup-steps 0 --precision "$precision" --device cuda --no-shuffle --seed 1 \
        --max-steps "$updates" --fused "$variant" \
        --metrics-out "$work/$name.csv" > "$work/$name.log" 2>&1 \
        || record "FAIL $stage run trainbench --fused $variant $precision: $(tail -1 "$work/$name.log")"
      [ "$variant" = on ] && grep -E "^(plan|memory plan|peak memory)" "$work/$name.log" | sed "s/^/$precision: /"
    done
    report "$stage $precision: trainbench median update_ms after 5 updates, --fused on $("$python" - \
      "$work/${stage}_trainbench_$precision.csv" "$work/${stage}_trainbench_eager_$precision.csv" <<'PY'
import csv, statistics, sys
def median(path):
    try:
        rows = list(csv.DictReader(open(path)))[5:]
        return f"{statistics.median(float(r['update_ms']) for r in rows):.2f} ms"
    except (OSError, KeyError, ValueError, statistics.StatisticsError):
        return "no figures"
print(f"{median(sys.argv[1])}, --fused off {median(sys.argv[2])}")
PY
)"
    local torch_gpt=("$python" "$root/bench/torch_gpt_throughput.py" --device cuda --dataset "$data" "${shape[@]}"
                     --lr 1e-3 --precision "$precision" --seed 1 --updates "$updates" --warmup 5)
    local variants=(eager) flag
    [ "${TORCH_COMPILE:-1}" = "0" ] || variants+=(compile)
    for variant in "${variants[@]}"; do
      flag=()
      [ "$variant" = compile ] && flag=(--compile)
      # torch.compile's first compilation can take minutes: past TORCH_TIMEOUT seconds it stops.
      timeout "${TORCH_TIMEOUT:-300}" "${torch_gpt[@]}" ${flag[@]+"${flag[@]}"} \
        --out "$work/${stage}_torch_${variant}_$precision.json" > /dev/null \
        2> "$work/${stage}_torch_${variant}_$precision.log" \
        || report "$stage: PyTorch $variant $precision failed (exit $?): $(tail -1 "$work/${stage}_torch_${variant}_$precision.log")"
    done
    report "$("$python" "$here/summarize.py" --out "$work" --stage "$stage" --gpt-speed-line "$precision")"
  done
}

if wants gptspeed; then
  step "gptspeed: GPT L6 H6 C384 T256 on the GPU, trainbench and PyTorch"
  # nanoGPT's shakespeare_char config (dropout 0 here), one micro-batch per update, the same
  # precision on both sides (fp32: PyTorch with TF32 off, as trainbench's fp32; bf16: PyTorch's
  # autocast against trainbench's mixed precision), the same windows in the same order.
  # Both gather each micro-batch inline (trainbench's default --prefetch 0, PyTorch as nanoGPT).
  gpt_speed_stage gptspeed "${GPT_SPEED_UPDATES:-30}" "${GPT_SPEED_PRECISIONS:-fp32 bf16}" \
    --n-layer 6 --n-head 6 --n-embd 384 --block-size 256 --batch-size 64 --step-size 1
fi

if wants gpt2speed; then
  step "gpt2speed: GPT-2 small's shape (L12 H12 C768 T1024) on the GPU, trainbench and PyTorch"
  # Issue 32's second GPT: GPT-2 small's layers on this repository's byte vocabulary (the
  # machine has no GPT-2 tokenizer or corpus), 8 windows of 1024 tokens an update, bf16 by default.
  gpt_speed_stage gpt2speed "${GPT2_SPEED_UPDATES:-20}" "${GPT2_SPEED_PRECISIONS:-bf16}" \
    --n-layer 12 --n-head 12 --n-embd 768 --block-size 1024 --batch-size 8 --step-size 1
fi

if wants plan; then
  step "plan: trainbench-cli plan against the GPU's allocator"
  gpt_text
  plan_device="${PLAN_DEVICE:-cuda}"
  for precision in fp32 bf16; do
    for checkpointing in off on; do
      name="${precision}_checkpointing_$checkpointing"
      flags=(--model gpt --dataset "text:$work/gpt_text_x10.txt" --n-layer 6 --n-head 6 --n-embd 384 --block-size 256
             --batch-size 64 --step-size 1 --precision "$precision" --device "$plan_device")
      [ "$checkpointing" = on ] && flags+=(--gradient-checkpointing)
      "$cli" plan "${flags[@]}" --json > "$work/plan_$name.json" 2> "$work/plan_$name.log" \
        || { record "FAIL plan $name: $(tail -1 "$work/plan_$name.log")"; continue; }
      "$cli" train "${flags[@]}" --max-steps 3 --sample-chars 0 --eval-samples 64 --metrics-out "$work/plan_$name.csv" \
        >> "$work/plan_$name.log" 2>&1 || { record "FAIL plan $name: the run failed: $(tail -1 "$work/plan_$name.log")"; continue; }
      line="$("$python" - "$work/plan_$name.json" "$work/plan_$name.csv" <<'PY'
import csv, json, sys
plan = json.load(open(sys.argv[1]))
last = list(csv.DictReader(open(sys.argv[2])))[-1]
planned, held = plan["per_process_total_bytes"], int(last["mem_update_peak_live"])
used, reserved = int(last.get("device_used_bytes") or 0), int(last["mem_total"])
context = f"; context held {(used - reserved) / 2**20:.0f} MiB (the plan adds {plan['fixed_bytes'] / 2**20:.0f})" if used else ""
verdict = "PASS" if planned == held else "FAIL"
print(f"{verdict} plan == allocation: planned {planned:,} bytes, the allocator's live peak {held:,}{context}")
PY
)"
      record "${line%%:*}: $name ${line#*: }"
    done
  done
fi

if wants profile; then
  step "profile: where a GPT update's GPU time goes (ncu, per kernel)"
  # Two updates of the gptspeed model; ncu serialises the launches and times each kernel alone
  # (--clock-control none: the clocks as they run). The engine's peak measurement at start-up
  # (large products) is among the launches; it shows as such.
  gpt_text
  if command -v ncu > /dev/null; then
    for precision in ${PROFILE_PRECISIONS:-bf16}; do
      ncu --clock-control none --metrics gpu__time_duration.sum --csv \
        "$cli" train --model gpt --dataset "text:$work/gpt_text_x10.txt" --n-layer 6 --n-head 6 --n-embd 384 \
        --block-size 256 --batch-size 64 --precision "$precision" --device cuda --max-steps 2 --sample-chars 0 \
        --eval-samples 64 --quiet > "$work/profile_$precision.log" 2>&1 \
        || report "profile $precision: ncu failed: $(tail -1 "$work/profile_$precision.log")"
      "$python" "$here/kernel_times.py" "$work/profile_$precision.log" --label "2 GPT L6 C384 T256 $precision updates" \
        | tee -a "$work/information.txt"
    done
  else
    report "profile: ncu not on PATH"
  fi
fi

if wants techniques; then
  step "techniques: trainbench-cli compare on the GPU"
  # The workbench's own question, on a model the size of the speed runs: what each technique
  # does to update time and memory on this GPU.
  "$cli" compare --dataset "$data" --device cuda --hidden 4096,4096,4096 --batch-size 2048 --max-steps 60 \
    --preload-device --out-md "$work/techniques_cuda.md" --out-csv "$work/techniques_cuda.csv" \
    > "$work/techniques_cuda.log" 2>&1
  status=$?
  cat "$work/techniques_cuda.md" 2>/dev/null || tail -5 "$work/techniques_cuda.log"
  if [ $status -eq 0 ]; then record "PASS trainbench-cli compare --device cuda: every technique ran (table in techniques_cuda.md)"
  else record "FAIL trainbench-cli compare --device cuda (exit $status): $(tail -1 "$work/techniques_cuda.log")"; fi
fi

if wants torch; then
  step "speed: PyTorch"
  compile_flag=()
  [ "${TORCH_COMPILE:-1}" = "0" ] && compile_flag=(--no-compile)
  # torch.compile's first compilations can take minutes; past TORCH_TIMEOUT seconds the stage
  # stops and keeps what it measured (the script saves after every measurement).
  PYTHONUNBUFFERED=1 timeout "${TORCH_TIMEOUT:-300}" "$python" "$here/torch_mlp_bench.py" --out "$work/torch.json" \
    ${compile_flag[@]+"${compile_flag[@]}"} 2>&1 | tee "$work/torch.log"
fi

if wants summary; then
  step "summary"
  "$python" "$here/summarize.py" --out "$work"
fi

deliver
