#!/usr/bin/python3
"""PyTorch DistributedDataParallel's ms/update over gloo, the peer of `trainbench-cli train --processes N`.

Starts --processes copies of itself on this machine (torch.distributed, backend gloo, rendezvous
on a localhost TCP port), each with --threads threads (torch.set_num_threads and
OMP/OPENBLAS_NUM_THREADS before torch is imported; OMP_WAIT_POLICY=PASSIVE is the caller's to
set, as for the other PyTorch peers). As TrainBench's data parallelism: every global batch is
cut into contiguous equal shares, process r training on share r; DDP averages the gradients in
buckets during the backward pass (overlapped with it), which with each share's mean loss is the
global batch's mean. --processes 1 runs the plain model without DDP.

Models, the same as TrainBench's benchmark configurations:
  mlp  784-1024-1024-10 ReLU on Fashion-MNIST (Debian's dataset-fashion-mnist, bytes scaled to
       [0,1] per batch), Adam lr 1e-3 (bench/torch_mlp_throughput.py's update);
  gpt  nanoGPT's model.py from tests/fixtures/nanogpt_reference.py on kjv (TrainBench's extracted
       King James Bible, nanoGPT's byte vocabulary, windows of block_size + 1 tokens in order),
       AdamW with nanoGPT's decay groups, betas (0.9, 0.95), weight decay 0.1, clipping at 1.0,
       constant lr 1e-3 (bench/torch_gpt_throughput.py's update).

The timed update on process 0 spans gathering its share, zero_grad, forward, backward (with
DDP's allreduce), clipping, the optimizer step and reading the loss back; the median after
--warmup is reported. Prints one JSON object on stdout (progress on stderr):

    OMP_WAIT_POLICY=PASSIVE /usr/bin/python3 bench/torch_ddp_throughput.py --model gpt --processes 2 --threads 1
"""
import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FASHION_MNIST = "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"
FASHION_MNIST_LABELS = "/usr/share/datasets/fashion-mnist/train-labels-idx1-ubyte.gz"


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=("mlp", "gpt"), default="gpt")
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1, help="CPU threads of each process")
    parser.add_argument("--batch-size", type=int, default=None, help="global batch (mlp 256, gpt 32)")
    parser.add_argument("--updates", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5, help="first updates left out of the median")
    parser.add_argument("--dataset", default="kjv", help="gpt: kjv or text:PATH")
    parser.add_argument("--out", help="also write the JSON object to this file")
    # Set by the launching process for the processes it starts.
    parser.add_argument("--rank", type=int, default=-1, help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.batch_size is None:
        args.batch_size = 256 if args.model == "mlp" else 32
    if args.batch_size % args.processes:
        parser.error("--batch-size must be divisible by --processes (equal shares)")
    if not 0 <= args.warmup < args.updates:
        parser.error("--warmup must be at least 0 and below --updates")
    return args


ARGS = parse_args()


def log(*parts):
    print(*parts, file=sys.stderr, flush=True)


def launch():
    """Starts the processes, waits for them, and prints process 0's JSON."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    arguments = [a for a in sys.argv[1:]]
    children = [subprocess.Popen([sys.executable, os.path.abspath(__file__), *arguments, "--rank", str(r),
                                  "--port", str(port)],
                                 stdout=subprocess.PIPE if r == 0 else subprocess.DEVNULL)
                for r in range(ARGS.processes)]
    out = children[0].communicate()[0]
    codes = [c.wait() for c in children]
    if any(codes):
        sys.exit(f"torch_ddp_throughput.py: a process failed (exit codes {codes})")
    sys.stdout.write(out.decode())


if ARGS.rank < 0:
    launch()
    sys.exit(0)

# Thread counts must be fixed before torch (and the BLAS it loads) start their pools.
os.environ["OMP_NUM_THREADS"] = str(ARGS.threads)
os.environ["OPENBLAS_NUM_THREADS"] = str(ARGS.threads)
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch_bench_data import read_idx, text_training_tokens  # noqa: E402

sys.path.insert(0, os.path.join(ROOT, "tests", "fixtures"))


def make_mlp():
    model = torch.nn.Sequential(torch.nn.Linear(784, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 1024),
                                torch.nn.ReLU(), torch.nn.Linear(1024, 10))
    return model, torch.optim.Adam(model.parameters(), lr=1e-3)


def main():
    torch.set_num_threads(ARGS.threads)
    torch.set_num_interop_threads(1)
    rank, world = ARGS.rank, ARGS.processes
    if world > 1:
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{ARGS.port}", rank=rank, world_size=world)
    torch.manual_seed(1)
    share = ARGS.batch_size // world

    if ARGS.model == "mlp":
        pixels, labels = read_idx(FASHION_MNIST), read_idx(FASHION_MNIST_LABELS).long()
        model, optimizer = make_mlp()
        loss_fn = torch.nn.CrossEntropyLoss()

        def batch(u):
            first = (u * ARGS.batch_size + rank * share) % (pixels.shape[0] - share)
            index = torch.arange(first, first + share)
            return pixels.index_select(0, index).float().mul_(1.0 / 255.0), labels.index_select(0, index)

        def loss_of(net, x, y):
            return loss_fn(net(x), y)
        clip = False
        description = "MLP 784-1024-1024-10, Adam"
    else:
        from nanogpt_reference import GPT, GPTConfig, decay_groups  # noqa: E402
        tokens, vocab, _ = text_training_tokens(ARGS.dataset)
        T = 128
        config = GPTConfig(vocab_size=vocab, block_size=T, n_embd=128, n_head=4, n_layer=4, flash=False)
        model = GPT(config)
        optimizer = torch.optim.AdamW(decay_groups(model, 0.1), lr=1e-3, betas=(0.9, 0.95))
        windows = (len(tokens) - 1) // T
        offsets = torch.arange(T + 1)

        def batch(u):
            rows = (torch.arange(u * ARGS.batch_size + rank * share, u * ARGS.batch_size + (rank + 1) * share)
                    % windows) * T
            w = tokens[rows[:, None] + offsets]
            return w[:, :-1].contiguous(), w[:, 1:].contiguous()

        def loss_of(net, x, y):
            return net(x, y)[1]
        clip = True
        description = "GPT L4 H4 C128 T128, AdamW"

    net = torch.nn.parallel.DistributedDataParallel(model) if world > 1 else model
    times = []
    for u in range(ARGS.updates):
        t0 = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        x, y = batch(u)
        loss = loss_of(net, x, y)
        loss.backward()
        if clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        value = loss.item()
        times.append((time.perf_counter() - t0) * 1000.0)
        if rank == 0:
            log(f"update {u + 1}/{ARGS.updates}  loss {value:.4f}  {times[-1]:.1f} ms")
    if world > 1:
        dist.barrier()
        dist.destroy_process_group()
    if rank != 0:
        return
    result = {
        "program": "torch_ddp" if world > 1 else "torch",
        "model": ARGS.model,
        "description": description,
        "processes": world,
        "threads": ARGS.threads,
        "batch_size": ARGS.batch_size,
        "median_update_ms": statistics.median(times[ARGS.warmup:]),
        "update_ms": times,
        "torch": torch.__version__,
        "backend": "gloo" if world > 1 else "none",
    }
    text = json.dumps(result)
    print(text)
    if ARGS.out:
        with open(ARGS.out, "w") as f:
            f.write(text + "\n")


main()
