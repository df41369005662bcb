#!/usr/bin/env python3
"""The benchmark's last word: trainbench's CUDA engine against PyTorch on the same GPU, as a
Markdown table (printed, and written with the raw numbers to OUT)."""
import argparse
import csv
import json
import statistics


def trainbench_speed(path, skip):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))[skip:]
    if not rows:
        return None
    update_ms = statistics.median(float(r["update_ms"]) for r in rows)
    batch = int(rows[0]["batch_samples"])
    return {"update_ms": update_ms, "samples_per_second": batch / (update_ms / 1000.0),
            "updates_measured": len(rows)}


SIZES = [784, 4096, 4096, 4096, 10]
BATCH = 4096


def model_flops_per_update(batch):
    # Same count as torch_mlp_bench.py: forward, dW for every layer, dX for all but the first.
    pairs = list(zip(SIZES[:-1], SIZES[1:]))
    forward = sum(2 * batch * i * o for i, o in pairs)
    return forward + forward + sum(2 * batch * i * o for i, o in pairs[1:])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--skip", type=int, default=5, help="warm-up updates left out")
    args = parser.parse_args()
    # The PyTorch side may be missing (its stage failed or was not run): report ours anyway.
    try:
        with open(f"{args.out}/torch.json") as f:
            torch_results = json.load(f)
    except (OSError, ValueError) as error:
        torch_results = {"device": "unknown (no torch.json: " + type(error).__name__ + ")",
                         "torch": "n/a", "sizes": SIZES, "batch": BATCH,
                         "flops_per_update": model_flops_per_update(BATCH),
                         "bf16_gemm_peak_tflops": float("nan"), "eager": {}, "compile": {}}
    flops = torch_results["flops_per_update"]
    peak = torch_results["bf16_gemm_peak_tflops"]
    try:
        checks = open(f"{args.out}/checks.txt").read().strip().splitlines()
    except OSError:
        checks = []

    lines = [f"Device: {torch_results['device']} (torch {torch_results['torch']}); "
             f"MLP {'-'.join(map(str, torch_results['sizes']))}, batch {torch_results['batch']}, SGD; "
             f"bf16 GEMM peak (torch.matmul 8192^3): {peak:.0f} TFLOP/s", "",
             "| precision | trainbench samples/s | TFLOP/s | % of bf16 peak | torch eager samples/s "
             "| trainbench / eager | torch.compile samples/s |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    summary = {"torch": torch_results, "trainbench": {}, "checks": checks}
    for precision in ("fp32", "bf16", "fp16"):
        try:
            ours = trainbench_speed(f"{args.out}/speed_{precision}.csv", args.skip)
        except OSError:
            ours = None
        eager = torch_results["eager"].get(precision, {})
        compiled = torch_results["compile"].get(precision, {})
        if ours is None:
            lines.append(f"| {precision} | failed | | | {eager.get('samples_per_second', 0):,.0f} | | |")
            continue
        tflops = flops / (ours["update_ms"] / 1000.0) / 1e12
        ours["tflops"] = tflops
        summary["trainbench"][precision] = ours
        ratio = ours["samples_per_second"] / eager["samples_per_second"] if eager else float("nan")
        compiled_text = (f"{compiled['samples_per_second']:,.0f}" if "samples_per_second" in compiled
                         else "n/a (" + compiled.get("error", "not run")[:40] + ")")
        lines.append(f"| {precision} | {ours['samples_per_second']:,.0f} | {tflops:.0f} | "
                     f"{100 * tflops / peak:.0f}% | {eager.get('samples_per_second', 0):,.0f} | "
                     f"{ratio:.2f}x | {compiled_text} |")
    lines += ["", "Checks:"] + [f"- {c}" for c in checks]
    text = "\n".join(lines)
    with open(f"{args.out}/results.md", "w") as f:
        f.write(text + "\n")
    with open(f"{args.out}/results.json", "w") as f:
        json.dump(summary, f, indent=2)
    print(text)


if __name__ == "__main__":
    main()
