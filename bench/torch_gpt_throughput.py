#!/usr/bin/python3
"""PyTorch eager's ms/update on a character GPT, the peer of `trainbench-cli train --model gpt`.

Same model (nanoGPT's model.py, from tests/fixtures/nanogpt_reference.py, which TrainBench's
GPT is checked against; attention through F.scaled_dot_product_attention where this torch has
it, as nanoGPT runs it), same data (text:PATH or kjv with nanoGPT's byte vocabulary: the sorted
distinct bytes, the first 90% of the tokens train; windows of block_size + 1 tokens taken in
order, window w = tokens[w*T : w*T + T + 1], as TrainBench's --no-shuffle; or random tokens),
same update as TrainBench's GPT recipe: step_size micro-batches of batch_size / step_size
windows, each backward(loss / step_size) (nanoGPT's gradient_accumulation_steps), gradients
clipped at 1.0, then AdamW with nanoGPT's decay groups, betas (0.9, 0.95), weight decay 0.1,
constant lr (1e-3; the value does not change the timing), fused on CUDA where torch has it
(as nanoGPT). fp32 is true fp32 (TF32 off, as TrainBench's fp32); bf16 is torch.autocast on
the device with fp32 weights.

The timed update is what TrainBench's StepMetrics::update_ms covers: gathering the
micro-batches' windows (and copying them to the GPU), zero_grad, forward, loss, backward,
clipping and the optimizer step, ending with the loss read back (on CUDA, synchronised every
update). The median of the updates after --warmup is reported, with tokens/s = batch_size x
block_size / median.

Threads: --threads sets torch.set_num_threads and OMP/OPENBLAS_NUM_THREADS (before torch is
imported). On few cores set OMP_WAIT_POLICY=PASSIVE in the caller's environment: libgomp's
threads otherwise spin after each parallel region and fight OpenBLAS's for the cores (see
docs/BENCHMARKS.md); bench/gpt_throughput.sh does.

Prints one JSON object on stdout (progress goes to stderr):

    OMP_WAIT_POLICY=PASSIVE /usr/bin/python3 bench/torch_gpt_throughput.py --dataset kjv --threads 2
    python3 bench/torch_gpt_throughput.py --device cuda --dataset text:FILE --n-layer 6 --n-head 6 \\
        --n-embd 384 --block-size 256 --batch-size 64 [--compile]
"""
import argparse
import contextlib
import inspect
import json
import os
import resource
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="kjv",
                        help="kjv (TrainBench's extracted cache), text:PATH, or random (uniform tokens)")
    parser.add_argument("--vocab-size", type=int, default=65, help="random: the vocabulary size")
    parser.add_argument("--n-layer", type=int, default=4)
    parser.add_argument("--n-head", type=int, default=4)
    parser.add_argument("--n-embd", type=int, default=128)
    parser.add_argument("--block-size", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=32, help="windows per update (the global batch)")
    parser.add_argument("--step-size", type=int, default=1, help="micro-batches accumulated per update")
    parser.add_argument("--updates", type=int, default=30, help="updates run in all")
    parser.add_argument("--warmup", type=int, default=5, help="first updates left out of the median")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--threads", type=int, default=2, help="CPU threads (torch.set_num_threads)")
    parser.add_argument("--precision", choices=("fp32", "bf16"), default="fp32")
    parser.add_argument("--compile", action="store_true", help="torch.compile the model (as nanoGPT's compile=True)")
    parser.add_argument("--no-flash", action="store_true",
                        help="written-out attention even where scaled_dot_product_attention exists")
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--seed", type=int, default=1, help="initial weights (and the random tokens)")
    parser.add_argument("--out", help="also write the JSON object to this file")
    args = parser.parse_args()
    if args.batch_size % args.step_size:
        parser.error("--batch-size must be divisible by --step-size (equal micro-batches)")
    if not 0 <= args.warmup < args.updates:
        parser.error("--warmup must be at least 0 and below --updates")
    return args


ARGS = parse_args()
# Thread counts must be fixed before torch (and the BLAS it loads) start their pools.
os.environ["OMP_NUM_THREADS"] = str(ARGS.threads)
os.environ["OPENBLAS_NUM_THREADS"] = str(ARGS.threads)
import torch  # noqa: E402

sys.path.insert(0, os.path.join(ROOT, "tests", "fixtures"))
from nanogpt_reference import GPT, GPTConfig, decay_groups, flops_per_token  # noqa: E402
from torch_bench_data import text_training_tokens  # noqa: E402


def log(*parts):
    print(*parts, file=sys.stderr, flush=True)


def blas_in_use():
    """The BLAS library mapped into this process (Debian's torch takes libblas.so.3's
    alternative: OpenBLAS with libopenblas0-pthread, otherwise the ~20x slower reference BLAS)."""
    with open("/proc/self/maps") as maps:
        mapped = sorted({line.split()[-1] for line in maps if "blas" in line.lower() or "mkl" in line.lower()})
    return next((m for m in mapped if "openblas" in os.path.basename(m)), mapped[0] if mapped else "none")


def training_tokens():
    """(token ids of the training split as int64, vocabulary size, description)."""
    spec = ARGS.dataset
    if spec == "random":
        generator = torch.Generator().manual_seed(ARGS.seed)
        count = ARGS.updates * ARGS.batch_size * ARGS.block_size + 1
        return torch.randint(0, ARGS.vocab_size, (count,), generator=generator), ARGS.vocab_size, "random tokens"
    if spec != "kjv" and not spec.startswith("text:"):
        sys.exit(f"unknown --dataset {spec!r}: use kjv, text:PATH or random")
    tokens, vocabulary, size = text_training_tokens(spec)
    return tokens, vocabulary, f"{spec} ({size:,} bytes)"


def main():
    torch.set_num_threads(ARGS.threads)
    torch.set_num_interop_threads(1)
    device = torch.device(ARGS.device)
    cuda = device.type == "cuda"
    if cuda:
        # TrainBench's fp32 is true fp32; nanoGPT itself turns TF32 on.
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False

    tokens, vocab, data_text = training_tokens()
    T, batch, step_size = ARGS.block_size, ARGS.batch_size, ARGS.step_size
    micro = batch // step_size
    windows = (len(tokens) - 1) // T
    if windows < micro:
        sys.exit(f"{data_text} holds {windows} windows of {T + 1} tokens, fewer than one micro-batch ({micro})")
    offsets = torch.arange(T + 1)

    torch.manual_seed(ARGS.seed)
    config = GPTConfig(vocab_size=vocab, block_size=T, n_embd=ARGS.n_embd, n_head=ARGS.n_head,
                       n_layer=ARGS.n_layer, flash=not ARGS.no_flash)
    model = GPT(config).to(device)
    flash = model.transformer.h[0].attn.flash
    # nanoGPT's configure_optimizers: fused AdamW on CUDA where this torch has it.
    fused = cuda and "fused" in inspect.signature(torch.optim.AdamW).parameters
    optimizer = torch.optim.AdamW(decay_groups(model, 0.1), lr=ARGS.lr, betas=(0.9, 0.95),
                                  **({"fused": True} if fused else {}))
    forward = torch.compile(model) if ARGS.compile else model
    autocast = (torch.autocast(device_type=device.type, dtype=torch.bfloat16) if ARGS.precision == "bf16"
                else contextlib.nullcontext())

    def micro_batch(first_window):
        """Windows first_window .. + micro (wrapping at the split's end), as inputs and targets."""
        rows = (torch.arange(first_window, first_window + micro) % windows) * T
        w = tokens[rows[:, None] + offsets]
        x, y = w[:, :-1].contiguous(), w[:, 1:].contiguous()  # as nanoGPT's torch.stack
        if cuda:  # as nanoGPT's get_batch
            return x.pin_memory().to(device, non_blocking=True), y.pin_memory().to(device, non_blocking=True)
        return x, y

    def update(u):
        optimizer.zero_grad(set_to_none=True)
        loss_sum = torch.zeros((), device=device)
        for m in range(step_size):
            x, y = micro_batch(u * batch + m * micro)
            with autocast:
                _, loss = forward(x, y)
            (loss / step_size).backward()
            loss_sum += loss.detach()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        return loss_sum.item() / step_size  # reads the loss back: on CUDA, waits for the update

    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    times, losses = [], []
    for u in range(ARGS.updates):
        t0 = time.perf_counter()
        losses.append(update(u))
        if cuda:
            torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) * 1000.0)
        log(f"update {u + 1}/{ARGS.updates}  loss {losses[-1]:.4f}  {times[-1]:.1f} ms")

    timed = times[ARGS.warmup:]
    median = statistics.median(timed)
    tokens_per_update = batch * T
    per_token = flops_per_token(model)
    result = {
        "bench": "torch_gpt", "device": ARGS.device,
        "device_name": torch.cuda.get_device_name(device) if cuda else "cpu",
        "torch": torch.__version__, "blas": blas_in_use(), "threads": torch.get_num_threads(),
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", ""),
        "model": f"GPT L{ARGS.n_layer} H{ARGS.n_head} C{ARGS.n_embd} T{T} V{vocab}",
        "n_layer": ARGS.n_layer, "n_head": ARGS.n_head, "n_embd": ARGS.n_embd, "block_size": T,
        "vocab_size": vocab, "parameters": sum(p.numel() for p in model.parameters()),
        "dataset": data_text, "batch_size": batch, "step_size": step_size, "precision": ARGS.precision,
        "compile": ARGS.compile, "attention": "scaled_dot_product_attention" if flash else "written out",
        "optimizer": "AdamW" + (" fused" if fused else ""),
        "updates": ARGS.updates, "warmup": ARGS.warmup,
        "ms_per_update": round(median, 4),
        "p10_ms": round(statistics.quantiles(timed, n=10)[0], 4) if len(timed) >= 2 else round(median, 4),
        "p90_ms": round(statistics.quantiles(timed, n=10)[-1], 4) if len(timed) >= 2 else round(median, 4),
        "tokens_per_update": tokens_per_update,
        "tokens_per_second": round(tokens_per_update / (median / 1000.0), 1),
        "flops_per_token": per_token,
        "model_tflops_per_second": round(per_token * tokens_per_update / (median / 1000.0) / 1e12, 6),
        "first_loss": round(losses[0], 6), "last_loss": round(losses[-1], 6),
        "update_ms": [round(t, 4) for t in times],
    }
    if cuda:
        result["max_memory_allocated_bytes"] = torch.cuda.max_memory_allocated(device)
        result["max_memory_reserved_bytes"] = torch.cuda.max_memory_reserved(device)
    else:
        result["peak_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    text = json.dumps(result)
    if ARGS.out:
        with open(ARGS.out, "w") as f:
            f.write(text + "\n")
    print(text)


if __name__ == "__main__":
    try:
        main()
    except Exception as error:  # e.g. torch.compile without a working toolchain: say so in the JSON
        failure = json.dumps({"bench": "torch_gpt", "device": ARGS.device, "compile": ARGS.compile,
                              "error": f"{type(error).__name__}: {error}"[:500]})
        if ARGS.out:
            with open(ARGS.out, "w") as f:
                f.write(failure + "\n")
        print(failure)
        raise
