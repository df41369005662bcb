#!/usr/bin/env python3
"""Times two trainbench-cli binaries side by side: is a refactor free in speed?

The benchmark GPT (L4 H4 C128 T128, batch 32, AdamW) and MLP (784-1024-1024-10, batch 256, Adam)
of bench/mixed_precision_cpu.py, in each precision asked for, trained by BEFORE and AFTER in
alternation (the order flips every round, so a machine that slows down mid-run weighs on both).
A case's time is the median of its rounds' medians (each round's median update after --warmup
updates, from the CLI's --metrics-out CSV). Prints a table, AFTER / BEFORE per case, with every
round's figure so that the noise is visible; scripts/bit_identity.sh is its counterpart for the bits.

    bench/compare_clis.py BEFORE_CLI AFTER_CLI [--rounds 5] [--updates 30] [--precisions fp32,bf16,fp16]
"""
import argparse
import csv
import os
import statistics
import subprocess
import sys
import tempfile

GPT = ["--model", "gpt", "--dataset", "kjv", "--n-layer", "4", "--n-head", "4", "--n-embd", "128", "--block-size", "128",
       "--batch-size", "32", "--step-size", "1", "--optimizer", "adamw", "--lr", "1e-3", "--schedule", "constant",
       "--warmup-steps", "0", "--sample-chars", "0", "--eval-every", "0"]
MLP = ["--dataset", "fashion-mnist", "--hidden", "1024,1024", "--batch-size", "256", "--step-size", "1",
       "--optimizer", "adam", "--lr", "1e-3"]


def median_update_ms(cli, model, precision, args, workdir):
    csv_path = os.path.join(workdir, "metrics.csv")
    command = [cli, "train", *(GPT if model == "gpt" else MLP), "--precision", precision, "--threads", str(args.threads),
               "--max-steps", str(args.updates), "--no-shuffle", "--seed", "1", "--metrics-out", csv_path]
    run = subprocess.run(command, capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"{' '.join(command)} failed: {run.stderr.strip().splitlines()[-1:]}")
    with open(csv_path, newline="") as f:
        rows = list(csv.DictReader(f))
    return statistics.median(float(r["update_ms"]) for r in rows[args.warmup:])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before")
    parser.add_argument("after")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--updates", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--models", default="gpt,mlp")
    parser.add_argument("--precisions", default="fp32,bf16,fp16")
    args = parser.parse_args()
    cases = [(m, p) for m in args.models.split(",") for p in args.precisions.split(",")]
    times = {(case, which): [] for case in cases for which in ("before", "after")}
    with tempfile.TemporaryDirectory() as workdir:
        for r in range(args.rounds):
            order = ("before", "after") if r % 2 == 0 else ("after", "before")
            for case in cases:
                for which in order:
                    cli = args.before if which == "before" else args.after
                    times[(case, which)].append(median_update_ms(cli, *case, args, workdir))
    print(f"{args.rounds} rounds of {args.updates} updates, {args.threads} threads, median after {args.warmup}")
    print("| case | before ms | after ms | after / before | before rounds | after rounds |")
    print("| --- | ---: | ---: | ---: | --- | --- |")
    for case in cases:
        before, after = times[(case, "before")], times[(case, "after")]
        b, a = statistics.median(before), statistics.median(after)
        print(f"| {case[0]} {case[1]} | {b:.1f} | {a:.1f} | {a / b:.3f} | {', '.join(f'{t:.1f}' for t in before)} | "
              f"{', '.join(f'{t:.1f}' for t in after)} |")


if __name__ == "__main__":
    main()
