#!/bin/sh
# Builds gemm_libraries next to this script (or into $1). Debian 12 packages: libeigen3-dev,
# libopenblas-dev, libdnnl-dev (oneDNN 2.6, OpenMP runtime), libxsmm-dev (static libraries).
# The Eigen defines are the engine's (core/CMakeLists.txt), so Eigen allocates as it does there.
set -e
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here}
mkdir -p "$out"
g++ -std=c++20 -O3 -march=native -Wall -Wextra -Wno-maybe-uninitialized -isystem /usr/include/eigen3 \
    -DEIGEN_NO_AUTOMATIC_RESIZING -DEIGEN_STACK_ALLOCATION_LIMIT=2097152 \
    "$here/gemm_libraries.cpp" -o "$out/gemm_libraries" \
    -ldnnl -lxsmm -lopenblas -lgomp -lpthread -ldl -lrt -lm
echo "built $out/gemm_libraries"
