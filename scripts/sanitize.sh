#!/usr/bin/env bash
# Sanitizer and fuzzing stages (docs/RELIABILITY.md), each configured, built and run from
# scratch in its own build folder. .ci/run runs all three after the README's test command
# (stage times from a cold cache in docs/RELIABILITY.md).
#
#   ./scripts/sanitize.sh asan           AddressSanitizer + UndefinedBehaviorSanitizer (GCC), no
#                                        Qt Widgets: build and run the core, cli and mpi suites
#   ./scripts/sanitize.sh tsan           ThreadSanitizer (GCC), no Qt Widgets: build and run the
#                                        core suites that run threads (the worker team, the
#                                        prefetch loader, the stop flag pressed from another thread)
#   ./scripts/sanitize.sh fuzz [SECONDS] build the libFuzzer harnesses (clang, ASan + UBSan) and run
#                                        each for SECONDS (default 60) from fuzz/corpus/<harness>
#
# A stage fails when a test fails, a sanitizer reports anything (in a test or in a trainbench-cli
# it started: every report goes to BUILD/sanitizer-reports/ and is printed at the end), or a
# harness finds a crash, a leak, a hang or a broken invariant (the input is kept in
# BUILD/fuzz-findings/).
#
# Installs clang and its runtimes when missing (apt-get, as root or through sudo); the rest of
# the build's packages come from ./scripts/setup.sh (run it first on a new machine).
# Environment: SANITIZE_BUILD_PREFIX (build folders are PREFIX-asan, PREFIX-tsan, PREFIX-fuzz;
# default build, as the CMake presets), JOBS (default: all cores), CTEST_ARGS (extra ctest
# arguments, e.g. "-R core/"), FUZZ_JOBS (harnesses run at once; default JOBS).
set -euo pipefail

stage="${1:-}"
case "$stage" in
  asan | tsan) ;;
  fuzz) fuzz_seconds="${2:-60}" ;;
  *)
    echo "usage: $0 asan | tsan | fuzz [SECONDS]" >&2
    exit 2
    ;;
esac

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${SANITIZE_BUILD_PREFIX:-$root/build}-$stage"
jobs="${JOBS:-$(nproc)}"
supp="$root/scripts/sanitizers"
reports="$build_dir/sanitizer-reports"

say() { printf '\n== [%4ds] %s: %s\n' "$SECONDS" "$stage" "$*"; }

# shellcheck source-path=SCRIPTDIR source=lib/common.sh
. "$root/scripts/lib/common.sh"

# clang for libFuzzer; libclang-rt-14-dev holds libFuzzer and clang's sanitizer runtimes;
# libomp-dev is the OpenMP the benchmarks' configure asks for when the compiler is clang.
# GCC's sanitizer runtimes (libasan, libubsan, libtsan) come with build-essential.
packages=()
[ "$stage" = fuzz ] && packages=(clang libclang-rt-14-dev libomp-dev)

# The suites ThreadSanitizer runs: those that run the engine's threads (the worker team, the
# prefetch loader, train() on a thread of its own stopped from another).
tsan_tests=(core/test_worker_team core/test_parallel_range core/test_training_threads core/test_accumulation core/test_memory_techniques core/test_gpt_model)
# The suites that start processes under mpirun (the compare tables include rows of 2 processes;
# the plan test trains its ZeRO rows with 2; the pipeline test runs a process per stage).
mpi_tests='^(cli/test_cli_processes|cli/test_cli_pipeline|cli/test_cli_two_hosts|cli/test_cli_compare|cli/test_cli_gpt|cli/test_cli_plan|mpi/.*)$'

configure_and_build() {
  # The stage's CMake preset (CMakePresets.json: sanitizers, -O1 -g1, no CUDA), in this stage's
  # folder; the asan stage leaves out the Qt app, which its suites do not run.
  local targets
  case "$stage" in
    asan) targets=(trainbench_tests) ;;
    tsan) targets=("${tsan_tests[@]//\//_}") ;;
    fuzz) targets=(trainbench_fuzzers) ;;
  esac
  prepare_ccache "$build_dir" "$root"
  say "configuring in $build_dir"
  (cd "$root" && cmake --preset "$stage" -B "$build_dir" -DTRAINBENCH_GUI=OFF)
  say "building ${targets[*]} with $jobs jobs"
  cmake --build "$build_dir" -j"$jobs" --target "${targets[@]}"
  say "built"
}

# Every sanitizer writes its reports to files (one per process), so a report from a
# trainbench-cli that a test started, or from a test whose own output ctest does not show,
# is not lost. exitcode 86 makes the process fail even where a test expects another code.
sanitizer_environment() {
  rm -rf "$reports"
  mkdir -p "$reports"
  export ASAN_OPTIONS="detect_leaks=1:check_initialization_order=1:strict_init_order=1:detect_stack_use_after_return=1:exitcode=86:log_path=$reports/asan"
  export LSAN_OPTIONS="suppressions=$supp/lsan.supp:print_suppressions=0"
  export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:exitcode=86:log_path=$reports/ubsan"
  # ignore_noninstrumented_modules: Qt (QtTest's watchdog thread, QMutex on futexes) is not
  # instrumented, so TSan cannot see its synchronisation and reported races inside it at the
  # exit of the test executables; accesses from our instrumented code are still checked, and
  # synchronisation through the C++ library (std::condition_variable) still counts.
  export TSAN_OPTIONS="halt_on_error=1:exitcode=86:second_deadlock_stack=1:ignore_noninstrumented_modules=1:suppressions=$supp/tsan.supp:log_path=$reports/tsan"
}

# Prints every report and fails when there is one.
check_reports() {
  local files
  files=$(find "$reports" -type f | sort)
  if [ -n "$files" ]; then
    say "sanitizer reports:"
    local f
    for f in $files; do
      echo "---- $f"
      cat "$f"
    done
    return 1
  fi
  say "no sanitizer reports"
}

run_tests() {
  sanitizer_environment
  local select=(-R '^(core|cli|mpi)/')
  if [ "$stage" = tsan ]; then
    local joined
    joined=$(IFS='|'; echo "${tsan_tests[*]}")
    select=(-R "^($joined)\$")
  fi
  say "running the tests (one at a time, as setup.sh: each training test uses every core)"
  local status=0
  if [ "$stage" = asan ]; then
    # The processes these tests start under mpirun end in Open MPI's MPI_Finalize, which
    # unloads its plugins with memory they still hold: LeakSanitizer then reports leaks it
    # cannot even name (frames in unloaded modules). Those tests run with leak detection off;
    # ASan's memory errors and UBSan still stop them.
    # shellcheck disable=SC2086 # CTEST_ARGS is a list of words on purpose
    ctest --test-dir "$build_dir" --output-on-failure "${select[@]}" -E "$mpi_tests" ${CTEST_ARGS:-} || status=$?
    say "the tests that start mpirun, without leak detection (Open MPI's plugins leak at MPI_Finalize)"
    # shellcheck disable=SC2086
    ASAN_OPTIONS="${ASAN_OPTIONS/detect_leaks=1/detect_leaks=0}" \
      ctest --test-dir "$build_dir" --output-on-failure -R "$mpi_tests" ${CTEST_ARGS:-} || status=$?
  else
    # shellcheck disable=SC2086
    ctest --test-dir "$build_dir" --output-on-failure "${select[@]}" ${CTEST_ARGS:-} || status=$?
  fi
  check_reports || status=1
  return $status
}

run_fuzzers() {
  local bin="$build_dir/fuzz" findings="$build_dir/fuzz-findings" logs="$build_dir/fuzz-logs"
  rm -rf "$findings" "$logs"
  mkdir -p "$findings" "$logs"
  export ASAN_OPTIONS="detect_leaks=1:exitcode=86"
  export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
  local harnesses=() h
  for h in "$root"/fuzz/fuzz_*.cpp; do harnesses+=("$(basename "$h" .cpp)"); done
  say "running ${#harnesses[@]} harnesses for ${fuzz_seconds}s each, ${FUZZ_JOBS:-$jobs} at a time"
  # Each harness writes the inputs it finds to a working corpus in the build folder; the
  # committed seeds (fuzz/corpus/<harness>) are only read.
  run_one() {
    local name="$1" work="$build_dir/fuzz-corpus/$1"
    mkdir -p "$work" "$findings/$name"
    # -timeout: an input that takes 30 s is a hang; -rss_limit_mb: 2 GiB is far beyond what
    # a few-KB input may make a loader allocate.
    local status=0
    "$bin/$name" -max_total_time="$fuzz_seconds" -timeout=30 -rss_limit_mb=2048 -print_final_stats=1 \
      -artifact_prefix="$findings/$name/" "$work" "$root/fuzz/corpus/$name" > "$logs/$name.log" 2>&1 ||
      status=$?
    echo "$status" > "$logs/$name.status"
  }
  for h in "${harnesses[@]}"; do
    while [ "$(jobs -rp | wc -l)" -ge "${FUZZ_JOBS:-$jobs}" ]; do sleep 1; done
    run_one "$h" &
  done
  wait
  local status=0
  for h in "${harnesses[@]}"; do
    if [ "$(cat "$logs/$h.status")" = 0 ]; then
      printf '%-20s ok    %s\n' "$h" "$(fuzz_summary "$logs/$h.log")"
    else
      status=1
      printf '%-20s FAIL  (log: %s)\n' "$h" "$logs/$h.log"
      tail -n 60 "$logs/$h.log"
      ls -l "$findings/$h"
    fi
  done
  return $status
}

# "executions, exec/s, cov, ft, corpus" from libFuzzer's last status line and final stats.
fuzz_summary() {
  local log="$1" runs speed line
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
  line=$(grep -E '^#[0-9]+' "$log" | tail -n 1 | grep -oE 'cov: [0-9]+ ft: [0-9]+ corp: [0-9]+/[0-9]+[a-zA-Z]*' || true)
  echo "$runs runs, $speed exec/s, $line"
}

install_missing_packages sanitize.sh "${packages[@]}"
configure_and_build
case "$stage" in
  asan | tsan) run_tests ;;
  fuzz) run_fuzzers ;;
esac
say "done in ${SECONDS}s"
