#!/usr/bin/python3
"""Medians over rounds of gemm_libraries / torch_matmul.py CSV output, as Markdown tables.

    summarize.py round1.csv round2.csv round3.csv ...

One table per input type (f32, bf16) with a column per library/threading: the median over the
rounds of each round's median-call GFLOP/s (with the rounds' min-max when they differ by more
than 10%), then one table of heap allocations per call and max relative errors.
"""
import csv
import statistics
import sys
from collections import defaultdict


def main(paths):
    runs = defaultdict(list)  # (shape, lib, dtype, threads) -> rows
    shapes = []
    packs = defaultdict(list)  # shape -> ms of libxsmm's VNNI reformat of B
    for path in paths:
        with open(path) as f:
            for row in csv.DictReader(line for line in f if not line.startswith("#")):
                if row["dtype"] == "vnni-pack B":
                    packs[row["shape"]].append(float(row["median_ms"]))
                if not row["gflops"] or row["shape"] == "shape":
                    continue
                key = (row["shape"], row["lib"], row["dtype"], row["threads"])
                runs[key].append(row)
                if (row["shape"], row["group"]) not in shapes:
                    shapes.append((row["shape"], row["group"]))
    for kind in ("f32", "bf16"):
        cols = sorted({k[1:] for k in runs if k[2].startswith(kind)}, key=lambda c: (c[1], c[0], c[2]))
        if not cols:
            continue
        print(f"\n### {kind}: GFLOP/s (median over rounds of the median call)\n")
        print("| shape (MxKxN) | " + " | ".join(f"{lib} {dtype} {threads}" for lib, dtype, threads in cols) + " |")
        print("|---" * (len(cols) + 1) + "|")
        for shape, group in shapes:
            cells = []
            for col in cols:
                rows = runs.get((shape,) + col)
                if not rows:
                    cells.append("-")
                    continue
                g = [float(r["gflops"]) for r in rows]
                cell = f"{statistics.median(g):.0f}"
                if len(g) > 1 and max(g) > 1.1 * min(g):
                    cell += f" ({min(g):.0f}-{max(g):.0f})"
                cells.append(cell)
            print(f"| {shape} {group} | " + " | ".join(cells) + " |")
    if packs:
        print("\n### VNNI reformat of B [K x N] bf16 -> [K/2][N][2], 1 thread, ms (median over rounds)\n")
        print("| shape | ms |\n|---|---|")
        for shape, group in shapes:
            if packs.get(shape):
                print(f"| {shape} {group} | {statistics.median(packs[shape]):.3f} |")
    print("\n### heap allocations per call (max over shapes and rounds), max relative error (max over shapes)\n")
    print("| lib | dtype | threads | allocs/call | mmaps/call | max rel err | implementation(s) |")
    print("|---|---|---|---|---|---|---|")
    cols = sorted({k[1:] for k in runs}, key=lambda c: (c[0], c[1], c[2]))
    for col in cols:
        rows = [r for k, rs in runs.items() if k[1:] == col for r in rs]
        allocs = max((float(r["allocs_per_call"]) for r in rows if r["allocs_per_call"]), default=None)
        mmaps = max((float(r["mmaps_per_call"]) for r in rows if r["mmaps_per_call"]), default=None)
        err = max(float(r["max_rel_err"]) for r in rows if r["max_rel_err"])
        impls = sorted({r["impl"].split(" scratchpad=")[0] for r in rows})
        fmt = lambda v: "-" if v is None else f"{v:g}"
        print(f"| {col[0]} | {col[1]} | {col[2]} | {fmt(allocs)} | {fmt(mmaps)} | {err:.1e} | {'; '.join(impls)} |")


if __name__ == "__main__":
    main(sys.argv[1:])
