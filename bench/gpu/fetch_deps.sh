#!/usr/bin/env bash
# Run on a networked Debian 12 machine before bench/gpu/run.sh: the lent GPU machines have
# nvcc, CMake and PyTorch but no Eigen, nlohmann-json, CLI11, Qt and no network. Debian's own
# packages are downloaded (not installed) into .deps/debs (git-ignored); run.sh unpacks them on
# the GPU machine, outside the working tree (see its `unpack_deps`). They travel as .deb files
# because unpacked, Qt's ICU alone would take half of the 64 MiB the device tool carries.
#   build:  Eigen, nlohmann-json, CLI11, zlib (headers and static library), oneDNN (the CPU
#           engine's products; the GPU checks compare against that engine)
#   tests:  Qt 6 Core + Test and what they link (only so the Qt Test suite
#           tests/core/test_cuda_engine.cpp can be built and run on a real GPU)
#   data:   Fashion-MNIST from Debian's dataset-fashion-mnist, when installed here
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
deps="$root/.deps"
rm -rf "$deps/debs"
mkdir -p "$deps/debs"
cd "$deps/debs"
build_packages=(libeigen3-dev nlohmann-json3-dev libcli11-dev zlib1g-dev zlib1g libdnnl-dev libdnnl2)
test_packages=(qt6-base-dev qt6-base-dev-tools qmake6 qmake6-bin libqt6core6 libqt6test6 libicu72 libdouble-conversion3
               libpcre2-16-0 libb2-1 libglib2.0-0 libpcre2-8-0 libffi8 libmount1 libblkid1
               libselinux1 libzstd1)
# apt-get download runs as the _apt user where it can; a root-owned folder makes it warn.
chmod 777 "$deps/debs"
apt-get download "${build_packages[@]}" "${test_packages[@]}" 2> >(grep -v "unsandboxed" >&2)

# Real data for the checks and the benchmark (the GPU machine has no dataset package).
if [ -d /usr/share/datasets/fashion-mnist ]; then
  mkdir -p "$deps/fashion-mnist"
  cp /usr/share/datasets/fashion-mnist/*.gz "$deps/fashion-mnist/"
else
  echo "note: /usr/share/datasets/fashion-mnist missing (apt-get install dataset-fashion-mnist); run.sh will generate random IDX data" >&2
fi
echo "in $deps: $(ls "$deps/debs" | wc -l) packages, $(du -sh "$deps" | cut -f1) in all"
echo "carry it to the GPU machine: the device tool's run with carry [\".deps\"] (it is git-ignored)"
