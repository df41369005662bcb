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
# Debian's OpenBLAS 0.3.21 (DYNAMIC_ARCH) does not know family 6 model 0xCF (Emerald Rapids)
# and falls back to its Prescott (SSE3) kernels; this selects the AVX-512 ones. It applies to
# torch's fp32 products too (they go through the same OpenBLAS).
export OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-SkylakeX}
for r in $(seq "$rounds"); do
    echo "round $r" >&2
    "$out/gemm_libraries" > "$out/round$r.csv"
    /usr/bin/python3 "$here/torch_matmul.py" --threads 1 --header > "$out/torch$r.csv"
    /usr/bin/python3 "$here/torch_matmul.py" --threads 2 >> "$out/torch$r.csv"
done
/usr/bin/python3 "$here/summarize.py" "$out"/round*.csv "$out"/torch*.csv
