#!/usr/bin/env bash
# Run on a networked machine before bench/gpu/run.sh: the lent GPU machines have nvcc, CMake
# and PyTorch but no Eigen, nlohmann-json, CLI11 and no network. Debian's own packages are
# downloaded (not installed) and unpacked under .deps/ (git-ignored), which run.sh passes to
# CMake as a prefix; the working tree carries them to the GPU machine.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
deps="$root/.deps"
mkdir -p "$deps/debs"
cd "$deps/debs"
rm -f ./*.deb
apt-get download libeigen3-dev nlohmann-json3-dev libcli11-dev zlib1g-dev zlib1g
for deb in ./*.deb; do dpkg -x "$deb" "$deps"; done
cd "$deps" && rm -rf "$deps/debs"
# Real data for the checks and the benchmark (the GPU machine has no dataset package).
if [ -d /usr/share/datasets/fashion-mnist ]; then
  mkdir -p "$deps/fashion-mnist"
  cp /usr/share/datasets/fashion-mnist/*.gz "$deps/fashion-mnist/"
else
  echo "note: /usr/share/datasets/fashion-mnist missing (apt-get install dataset-fashion-mnist); run.sh will generate random IDX data" >&2
fi
# zlib1g-dev's libz.so points at the runtime library by a relative link; keep both in .deps.
echo "unpacked into $deps:"
ls "$deps/usr/share/eigen3/cmake" "$deps/usr/share/cmake" "$deps/usr/include" | sed 's/^/  /' || true
echo "carry it to the GPU machine: the device tool's run with carry [\".deps\"] (it is git-ignored)"
