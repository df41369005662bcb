#!/usr/bin/env bash
# Sets up a Debian 12 machine for TrainBench, builds it (Release) and then either runs the app or
# runs the test suite:
#
#   ./scripts/setup.sh run    install what is missing, build, start the desktop app on its default
#                             example (without a display: the same example headless via the CLI)
#   ./scripts/setup.sh test   install what is missing, build, run every test (ctest)
#   ./scripts/setup.sh build  install what is missing and build only
#
# Only packages that are not installed yet are installed (apt-get, as root or through sudo).
# Environment: BUILD_DIR (default build/), JOBS (default: all cores), CMAKE_ARGS (extra
# configure arguments, e.g. "-DTRAINBENCH_CUDA=OFF").
set -euo pipefail

mode="${1:-}"
case "$mode" in
  run | test | build) ;;
  *)
    echo "usage: $0 run|test|build   (run: build and start the app; test: build and run ctest)" >&2
    exit 2
    ;;
esac

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${BUILD_DIR:-$root/build}"
jobs="${JOBS:-$(nproc)}"

# What the build, the tests and the examples need. qt6-base-dev brings the OpenGL and Vulkan
# headers Qt6Gui's CMake package looks for; dataset-fashion-mnist is the Fashion example's data
# and is read by the tests; bible-kjv (the `bible` program) and bible-kjv-text (its data) give
# the King James Bible, the GPT example's default corpus "kjv", which the tests extract too.
# libdnnl-dev is oneDNN, the library the CPU engine's matrix products run in where it beats
# Eigen (bf16 on AMX or AVX512_BF16, fp32 on AVX-512; docs/ARCHITECTURE.md).
# libopenmpi-dev and openmpi-bin (mpirun) give multi-process runs (--processes), which the tests
# run; iproute2 (ip netns) lets a test stand two network namespaces in for two hosts
# (tests/cli/test_cli_two_hosts.cpp, which skips where the machine does not allow it). nvcc is
# optional: with it on PATH the CUDA engine is built too.
packages=(
  build-essential cmake git ccache pkg-config
  libeigen3-dev zlib1g-dev nlohmann-json3-dev libcli11-dev libdnnl-dev
  qt6-base-dev qt6-svg-dev libqcustomplot-dev
  libopenmpi-dev openmpi-bin iproute2
  dataset-fashion-mnist
  bible-kjv bible-kjv-text
)

# Seconds since the script started, so a slow phase (apt, build, tests) is easy to spot.
say() { printf '\n== [%4ds] %s\n' "$SECONDS" "$*"; }

# shellcheck source-path=SCRIPTDIR source=lib/common.sh
. "$root/scripts/lib/common.sh"

configure_and_build() {
  prepare_ccache "$build_dir" "$root"
  say "configuring (Release) in $build_dir"
  # CMakeLists.txt uses ccache as the compiler launcher whenever it is on PATH.
  # shellcheck disable=SC2086 # CMAKE_ARGS is a list of words on purpose
  cmake -S "$root" -B "$build_dir" -DCMAKE_BUILD_TYPE=Release ${CMAKE_ARGS:-}
  say "building with $jobs jobs"
  cmake --build "$build_dir" -j"$jobs"
}

run_app() {
  local app="$build_dir/app/trainbench"
  if [ -z "${DISPLAY:-}" ] && [ -z "${WAYLAND_DISPLAY:-}" ]; then
    say "no display: the app runs its default example headless through trainbench-cli"
  else
    say "starting $app"
  fi
  exec "$app" --run
}

run_tests() {
  say "running the test suite"
  # The ui tests draw offscreen (QT_QPA_PLATFORM is set per test), so no display is needed.
  # One test at a time: each training test already uses every core, and two of them sharing
  # the cores ran 25x slower on 2 cores (76 s instead of 11 s for the whole suite).
  # ctest's summary is the last thing printed; its exit status is this script's.
  exec ctest --test-dir "$build_dir" --output-on-failure
}

install_missing_packages setup.sh "${packages[@]}"
configure_and_build
case "$mode" in
  run) run_app ;;
  test) run_tests ;;
  build) say "built: $build_dir/app/trainbench and $build_dir/app/trainbench-cli" ;;
esac
