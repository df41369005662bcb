#!/bin/sh
# Builds gemm_libraries and runs the whole comparison: ROUNDS (3) rounds of gemm_libraries and
# of torch_matmul.py (1 and 2 threads), then prints the medians over the rounds (summarize.py).
# Results go to $OUT (/tmp/gemm_libraries). Run it on an otherwise idle machine: a compiler or a
# test run on the second core makes the 2-thread figures meaningless.
set -e
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-/tmp/gemm_libraries}
rounds=${ROUNDS:-3}
"$here/build.sh" "$out"
pgrep -x cc1plus > /dev/null && echo "warning: compilers are running; timings will be noisy" >&2
# Debian's OpenBLAS 0.3.21 (DYNAMIC_ARCH) does not know newer CPUs: it runs Intel family 6
# model 0xCF (Emerald Rapids) on its Prescott (SSE3) kernels and AMD Zen 5 on its Haswell (AVX2)
# ones, and some machines set OPENBLAS_CORETYPE=Haswell in the environment. On a CPU with AVX-512
# this selects the AVX-512 kernels (as bench/mixed_precision_cpu.py does); elsewhere it leaves
# OpenBLAS's own choice. It applies to torch's fp32 products too (the same OpenBLAS).
if grep -qw avx512f /proc/cpuinfo; then
    export OPENBLAS_CORETYPE=SkylakeX
fi
for r in $(seq "$rounds"); do
    echo "round $r" >&2
    "$out/gemm_libraries" > "$out/round$r.csv"
    /usr/bin/python3 "$here/torch_matmul.py" --threads 1 --header > "$out/torch$r.csv"
    /usr/bin/python3 "$here/torch_matmul.py" --threads 2 >> "$out/torch$r.csv"
done
/usr/bin/python3 "$here/summarize.py" "$out"/round*.csv "$out"/torch*.csv
