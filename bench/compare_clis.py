#!/usr/bin/env python3
"""Times two trainbench-cli binaries side by side: is a refactor free in speed?

The benchmark GPT (L4 H4 C128 T128, batch 32, AdamW) and MLP (784-1024-1024-10, batch 256, Adam)
of bench/benchmark_models.py, in each precision asked for, trained by BEFORE and AFTER in
alternation (the order flips every round, so a machine that slows down mid-run weighs on both).
A case's time is the median of its rounds' medians (each round's median update after --warmup
updates, from the CLI's --metrics-out CSV). Prints a table, AFTER / BEFORE per case, with every
round's figure so that the noise is visible; scripts/bit_identity.sh is its counterpart for the bits.

With --cycles N the two binaries' runs of a case instead live side by side and take turns
(bench/turns.py), N counted cycles: the table then gives each binary's median over its counted
updates and AFTER / BEFORE cycle by cycle (median, lowest and highest), which sees a change of a
few percent that the rounds' medians lose in a host's slow and fast phases.

    bench/compare_clis.py BEFORE_CLI AFTER_CLI [--rounds 5] [--updates 30] [--precisions fp32,bf16,fp16]
    bench/compare_clis.py BEFORE_CLI AFTER_CLI --cycles 30 [--models gpt] [--precisions bf16]
"""
import argparse
import csv
import os
import statistics
import subprocess
import sys
import tempfile

from benchmark_models import TURN, run_flags
from turns import median_of, ratios_by_cycle, time_in_turns


def median_update_ms(cli, model, precision, args, workdir):
    csv_path = os.path.join(workdir, "metrics.csv")
    command = [cli, "train", *run_flags(model, precision, args.threads), "--max-steps", str(args.updates),
               "--metrics-out", csv_path]
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
    parser.add_argument("--cycles", type=int, help="take turns, this many counted cycles (after 2 not counted)")
    args = parser.parse_args()
    cases = [(m, p) for m in args.models.split(",") for p in args.precisions.split(",")]
    if args.cycles:
        return compare_in_turns(cases, args)
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


def compare_in_turns(cases, args):
    print(f"turns of GPT {TURN['gpt']}, MLP {TURN['mlp']} updates (the first of each not counted), {args.cycles} "
          f"counted cycles after 2, {args.threads} threads")
    print("| case | before ms | after ms | after / before | by cycle: median (lowest-highest) |")
    print("| --- | ---: | ---: | ---: | --- |")
    with tempfile.TemporaryDirectory() as workdir:
        for model, precision in cases:
            flags = run_flags(model, precision, args.threads)
            turns = time_in_turns({"before": (args.before, flags), "after": (args.after, flags)}, TURN[model],
                                  args.cycles, 2, workdir)
            b, a = median_of(turns["before"]), median_of(turns["after"])
            ratios = ratios_by_cycle(turns["after"], turns["before"])
            print(f"| {model} {precision} | {b:.1f} | {a:.1f} | {a / b:.3f} | {statistics.median(ratios):.3f} "
                  f"({ratios[0]:.2f}-{ratios[-1]:.2f}) |", flush=True)


if __name__ == "__main__":
    main()
