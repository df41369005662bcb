#!/usr/bin/python3
"""PyTorch's CPU matmul on gemm_libraries.cpp's shapes: the reference peer.

Prints the same CSV columns as gemm_libraries (allocation counts left empty). Run it once per
thread count; the thread settings must be in the environment before torch (and the BLAS it
loads) starts, so the script sets them itself:

    /usr/bin/python3 torch_matmul.py --threads 1
    /usr/bin/python3 torch_matmul.py --threads 2

fp32 goes to the BLAS behind libblas.so.3 (Debian: OpenBLAS), bf16 to oneDNN (DNNL_VERBOSE=1
shows the implementation). Output is bf16 for bf16 inputs (torch.matmul keeps the dtype).
"""
import argparse
import os
import sys
import time

SHAPES = [  # M, K, N, group: as in gemm_libraries.cpp
    (1024, 1024, 1024, "square"),
    (4096, 128, 384, "gpt"), (4096, 128, 128, "gpt"), (4096, 128, 512, "gpt"), (4096, 512, 128, "gpt"),
    (128, 4096, 384, "gpt dW"), (512, 4096, 128, "gpt dW"),
    (256, 784, 1024, "mlp"), (256, 1024, 1024, "mlp"), (256, 1024, 10, "mlp"),
    (1024, 256, 1024, "mlp dW"), (1024, 256, 784, "mlp dW"),
]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--min-time", type=float, default=0.2)
    parser.add_argument("--min-reps", type=int, default=7)
    parser.add_argument("--header", action="store_true")
    args = parser.parse_args()
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = str(args.threads)
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    if "torch" in sys.modules:
        sys.exit("torch was imported before the thread settings")
    import torch

    torch.set_num_threads(args.threads)
    if args.header:
        print("shape,group,lib,dtype,threads,gflops,median_ms,allocs_per_call,mmaps_per_call,max_rel_err,impl")
    impl = (f"torch {torch.__version__} OMP_WAIT_POLICY={os.environ['OMP_WAIT_POLICY']}"
            f" OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(unset)')}")
    for m, k, n, group in SHAPES:
        gen = torch.Generator().manual_seed(42)
        a = torch.rand(m, k, generator=gen) * 2 - 1
        b = torch.rand(k, n, generator=gen) * 2 - 1
        for dtype, name in ((torch.float32, "f32"), (torch.bfloat16, "bf16->bf16")):
            x, y = a.to(dtype), b.to(dtype)
            ref = x.double() @ y.double()
            out = torch.empty(m, n, dtype=dtype)
            for _ in range(3):
                torch.matmul(x, y, out=out)
            err = ((out.double() - ref).abs().max() / ref.abs().max()).item()
            times = []
            start = time.perf_counter()
            while len(times) < args.min_reps or time.perf_counter() - start < args.min_time:
                t0 = time.perf_counter()
                torch.matmul(x, y, out=out)
                times.append(time.perf_counter() - t0)
            times.sort()
            median = times[len(times) // 2]
            print(f"{m}x{k}x{n},{group},torch,{name},{args.threads},{2.0 * m * k * n / median / 1e9:.1f},"
                  f"{median * 1e3:.4f},,,{err:.2e},{impl}", flush=True)


if __name__ == "__main__":
    main()
