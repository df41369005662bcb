#!/usr/bin/env python3
"""Where a run's GPU time goes: reads the CSV that `ncu --csv --metrics gpu__time_duration.sum`
printed (one row per kernel launch, mixed into the program's own output) and prints the kernels
by total time, with their launch counts and share. Usage: kernel_times.py LOG [--top N]."""
import argparse
import csv
import collections

UNITS = {"ns": 1e-6, "nsecond": 1e-6, "us": 1e-3, "usecond": 1e-3, "ms": 1.0, "msecond": 1.0, "s": 1e3, "second": 1e3}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("log")
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--label", default="")
    args = parser.parse_args()
    with open(args.log, errors="replace") as f:
        rows = [line for line in f if line.startswith('"')]
    totals, counts = collections.Counter(), collections.Counter()
    for row in csv.DictReader(rows):
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        name = row["Kernel Name"]
        name = name.split("(")[0] if "(" in name else name  # template arguments stay, parameters go
        value = float(row["Metric Value"].replace(",", "")) * UNITS.get(row["Metric Unit"], 1.0)
        totals[name] += value
        counts[name] += 1
    total = sum(totals.values())
    print(f"kernel time{(' of ' + args.label) if args.label else ''}: {total:.2f} ms in "
          f"{sum(counts.values())} launches")
    for name, ms in totals.most_common(args.top):
        print(f"  {ms:9.3f} ms {100 * ms / max(total, 1e-12):5.1f}% {counts[name]:6d}x  {name[:110]}")


if __name__ == "__main__":
    main()
