#!/usr/bin/python3
"""PyTorch's samples/s on issue 2's benchmark model, the peer of bench/mlp_throughput.cpp.

Same model (784-1024-1024-10 ReLU MLP, torch.nn.Linear init), same data (Fashion-MNIST from
Debian's dataset-fashion-mnist, kept as bytes and scaled to [0,1] per batch as TrainBench's
loader does), same global batch, same optimizer (Adam, PyTorch defaults, lr 1e-3), same
threads, fp32 (or with --precision bf16, torch.autocast to bf16 around the forward and the loss,
as PyTorch trains in bf16 mixed precision: fp32 master weights, bf16 products through oneDNN).
The timed update is everything TrainBench's StepMetrics::update_ms covers:
gathering the micro-batches, zero_grad, forward, loss, backward and optimizer.step. The
step_size 4 variant accumulates 4 micro-batches of 64 with loss / 4 each.

Run with Debian's interpreter: /usr/bin/python3 bench/torch_mlp_throughput.py --threads 2
"""
import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time

DATA_DIR = "/usr/share/datasets/fashion-mnist"


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--blas-threads", type=int, default=None,
                        help="OpenBLAS's own thread pool (default: --threads)")
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--warmup", type=int, default=10, help="updates left out of the median")
    parser.add_argument("--steps", type=int, default=40, help="timed updates per round")
    parser.add_argument("--rounds", type=int, default=3, help="variants alternate round by round")
    parser.add_argument("--interleave", type=int, default=5,
                        help="the variants take turns of this many updates (the first of each turn "
                             "is not timed); 0: each variant runs its updates in one go per round")
    parser.add_argument("--precision", choices=("fp32", "bf16"), default="fp32",
                        help="bf16: torch.autocast(cpu, bfloat16) around forward and loss")
    parser.add_argument("--json", action="store_true", help="one JSON object per line")
    parser.add_argument("--products", action="store_true",
                        help="also time the update's pieces alone (products, Adam), as bench/mlp_update_breakdown does")
    return parser.parse_args()


ARGS = parse_args()
# Thread counts must be fixed before torch (and the OpenBLAS it loads) start their pools.
os.environ["OMP_NUM_THREADS"] = str(ARGS.threads)
os.environ["OPENBLAS_NUM_THREADS"] = str(ARGS.blas_threads or ARGS.threads)
import torch  # noqa: E402
from torch_bench_data import read_idx  # noqa: E402


def blas_in_use():
    """The BLAS library actually mapped into this process, and torch's build-time claim."""
    libraries = set()
    with open("/proc/self/maps") as maps:
        for line in maps:
            path = line.split()[-1]
            if "blas" in path.lower() or "mkl" in path.lower():
                libraries.add(path)
    build = torch.__config__.show()
    blas_info = next((part.split("=")[1] for part in build.replace(",", " ").split() if part.startswith("BLAS_INFO=")), "?")
    alternative = ""
    try:
        out = subprocess.run(["update-alternatives", "--query", "libblas.so.3-x86_64-linux-gnu"],
                             capture_output=True, text=True, check=False).stdout
        alternative = next((line.split(": ", 1)[1] for line in out.splitlines() if line.startswith("Value:")), "")
    except OSError:
        pass
    return {"torch_blas_info": blas_info, "mapped": sorted(libraries), "libblas_alternative": alternative}


def make_model():
    return torch.nn.Sequential(
        torch.nn.Linear(784, 1024), torch.nn.ReLU(),
        torch.nn.Linear(1024, 1024), torch.nn.ReLU(),
        torch.nn.Linear(1024, 10))


def autocast():
    """bf16 mixed precision as PyTorch does it on the CPU, or nothing for fp32."""
    if ARGS.precision == "bf16":
        return torch.autocast(device_type="cpu", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def variant_updates(step_size, pixels, labels):
    """Runs one variant's updates one at a time, yielding (update ms, gather ms, loss) for each."""
    torch.manual_seed(0)
    model = make_model()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = torch.nn.CrossEntropyLoss()
    generator = torch.Generator().manual_seed(0)
    order = torch.randperm(pixels.shape[0], generator=generator)
    batch = ARGS.batch
    micro = batch // step_size
    scale = 1.0 / 255.0
    update = 0
    while True:
        start = (update * batch) % (pixels.shape[0] - batch)
        t0 = time.perf_counter()
        gather_seconds = 0.0
        optimizer.zero_grad()
        losses = []
        for k in range(step_size):
            g0 = time.perf_counter()
            index = order[start + k * micro:start + (k + 1) * micro]
            x = pixels.index_select(0, index).float().mul_(scale)
            y = labels.index_select(0, index)
            gather_seconds += time.perf_counter() - g0
            with autocast():
                loss = loss_fn(model(x), y) / step_size
            loss.backward()
            losses.append(loss.detach())
        optimizer.step()
        elapsed = time.perf_counter() - t0
        yield elapsed * 1000.0, gather_seconds * 1000.0, float(sum(losses))
        update += 1


def timed(update, chunk):
    """Whether 0-based update `update` is timed: not a warm-up update and, when the variants
    take turns, not the first update of a turn (its caches hold the other variant's data)."""
    return update >= ARGS.warmup and (chunk < 2 or update % chunk != 0)


def measure(pixels, labels):
    """Times both variants. With --interleave K they take turns of K updates each, so that
    drifting background load hits both alike; with 0 each runs its updates in one go per round."""
    results = {s: {"times": [], "gathers": [], "loss": 0.0} for s in (1, 4)}
    chunk = ARGS.interleave
    if chunk >= 2:
        runs = {s: variant_updates(s, pixels, labels) for s in (1, 4)}
        update = 0
        while min(len(r["times"]) for r in results.values()) < ARGS.steps * ARGS.rounds:
            for step_size, run in runs.items():
                for k in range(chunk):
                    ms, gather_ms, loss = next(run)
                    if timed(update + k, chunk):
                        results[step_size]["times"].append(ms)
                        results[step_size]["gathers"].append(gather_ms)
                    results[step_size]["loss"] = loss
            update += chunk
        return results
    for _ in range(ARGS.rounds):
        for step_size in (1, 4):
            run = variant_updates(step_size, pixels, labels)
            for update in range(ARGS.warmup + ARGS.steps):
                ms, gather_ms, loss = next(run)
                if timed(update, 0):
                    results[step_size]["times"].append(ms)
                    results[step_size]["gathers"].append(gather_ms)
                results[step_size]["loss"] = loss
    return results


def time_pieces(batch, repeats=20):
    """Median ms of the update's products at `batch` samples and of Adam's step, one at a time."""
    torch.manual_seed(0)
    model = make_model()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for p in model.parameters():
        p.grad = torch.randn_like(p) * 1e-3
    x1, x2 = torch.rand(batch, 784), torch.rand(batch, 1024)
    dz = torch.rand(batch, 1024)
    w1, b1 = model[0].weight.detach(), model[0].bias.detach()
    w2, b2 = model[2].weight.detach(), model[2].bias.detach()
    pieces = {
        "L1 forward 784->1024 (addmm)": (lambda: torch.addmm(b1, x1, w1.t()), 2 * 784 * 1024 * batch),
        "L2 forward 1024->1024 (addmm)": (lambda: torch.addmm(b2, x2, w2.t()), 2 * 1024 * 1024 * batch),
        "L2 backward dW (mm)": (lambda: dz.t().mm(x2), 2 * 1024 * 1024 * batch),
        "L2 backward dX (mm)": (lambda: dz.mm(w2), 2 * 1024 * 1024 * batch),
        "L1 backward dW (mm)": (lambda: dz.t().mm(x1), 2 * 784 * 1024 * batch),
        "adam step": (optimizer.step, 0),
    }
    rows = []
    for name, (fn, flops) in pieces.items():
        times = []
        for r in range(repeats + 3):
            t0 = time.perf_counter()
            fn()
            if r >= 3:
                times.append((time.perf_counter() - t0) * 1000.0)
        ms = statistics.median(times)
        rows.append((name, ms, flops / (ms * 1e6) if flops else None))
    return rows


def main():
    torch.set_num_threads(ARGS.threads)
    torch.set_num_interop_threads(1)
    pixels = read_idx(os.path.join(DATA_DIR, "train-images-idx3-ubyte.gz"))
    labels = read_idx(os.path.join(DATA_DIR, "train-labels-idx1-ubyte.gz")).long()
    if ARGS.batch % 4:
        sys.exit("--batch must be divisible by 4 (the step_size 4 variant uses equal micro-batches)")

    results = measure(pixels, labels)
    variants = {s: (r["times"], r["gathers"], r["loss"]) for s, r in results.items()}

    if ARGS.products:
        for batch in (ARGS.batch, ARGS.batch // 4):
            print(f"PyTorch pieces at micro-batch {batch} (ms per call):", file=sys.stderr if ARGS.json else sys.stdout)
            for name, ms, gflops in time_pieces(batch):
                line = f"  {name:<34} {ms:8.3f} ms" + (f"  {gflops:6.1f} GFLOP/s" if gflops else "")
                print(line, file=sys.stderr if ARGS.json else sys.stdout)

    blas = blas_in_use()
    baseline_ms = statistics.median(variants[1][0])
    rows = []
    for step_size, (times, gathers, loss) in variants.items():
        median = statistics.median(times)
        q = statistics.quantiles(times, n=10)
        rows.append({
            "bench": "torch_mlp", "variant": f"{ARGS.precision}-step{step_size}",
            "config": f"OMP_WAIT_POLICY={os.environ['OMP_WAIT_POLICY']}" if os.environ.get("OMP_WAIT_POLICY") else "as installed", "threads": ARGS.threads,
            "torch_threads": torch.get_num_threads(), "blas_threads": ARGS.blas_threads or ARGS.threads,
            "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", ""), "batch": ARGS.batch, "step_size": step_size,
            "precision": ARGS.precision, "updates": len(times), "interleave": ARGS.interleave, "median_ms": round(median, 4),
            "p10_ms": round(q[0], 4), "p90_ms": round(q[-1], 4),
            "samples_per_second": round(ARGS.batch / (median / 1000.0), 2),
            "median_gather_ms": round(statistics.median(gathers), 4),
            "vs_fp32_step1_pct": round(100.0 * (median / baseline_ms - 1.0), 2),
            "last_loss": round(loss, 6), "torch": torch.__version__,
            "blas": next((m for m in blas["mapped"] if "openblas" in os.path.basename(m)),
                         blas["mapped"][0] if blas["mapped"] else blas["torch_blas_info"]),
        })
    if ARGS.json:
        print(json.dumps({"bench": "torch_blas", **blas, "torch": torch.__version__,
                          "parallel_info": torch.__config__.parallel_info().splitlines()[:4]}))
        for row in rows:
            print(json.dumps(row))
        return
    print(f"PyTorch {torch.__version__}: fashion-mnist, MLP 784-1024-1024-10 relu, adam, {ARGS.precision}, batch {ARGS.batch}, "
          f"{torch.get_num_threads()} threads; {ARGS.rounds} rounds x {ARGS.steps} timed updates after {ARGS.warmup} warm-up"
          + (f", variants taking turns of {ARGS.interleave} updates" if ARGS.interleave >= 2 else ""))
    print(f"BLAS: build says {blas['torch_blas_info']}; mapped {', '.join(blas['mapped']) or 'none'}; "
          f"libblas.so.3 alternative -> {blas['libblas_alternative']}")
    print(f"{'variant':<12} {'median ms':>10} {'p10 ms':>8} {'p90 ms':>8} {'samples/s':>10} {'gather ms':>10}")
    for row in rows:
        print(f"{row['variant']:<12} {row['median_ms']:>10.2f} {row['p10_ms']:>8.2f} {row['p90_ms']:>8.2f} "
              f"{row['samples_per_second']:>10.0f} {row['median_gather_ms']:>10.2f}")


if __name__ == "__main__":
    main()
