#!/usr/bin/env python3
"""The GPU run's last word: trainbench's CUDA engine against PyTorch on the same GPU (speed,
the products alone, memory) and the correctness checks, as Markdown (printed, and written with
the raw numbers to OUT/results.md and OUT/results.json). Every figure is read from the files
the stages wrote; a stage that did not run or failed shows as such."""
import argparse
import csv
import json
import math
import re
import statistics

from benchmark_model import BATCH, SIZES, model_flops_per_update

MIB = 1024.0 * 1024.0
# name in speed_<name>.csv -> (precision, step_size)
SPEED_RUNS = {"fp32": ("fp32", 1), "bf16": ("bf16", 1), "fp16": ("fp16", 1), "bf16_step4": ("bf16", 4)}


def load_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def read_lines(path):
    try:
        with open(path) as f:
            return f.read().strip().splitlines()
    except OSError:
        return []


def trainbench_run(out, name, skip):
    try:
        with open(f"{out}/speed_{name}.csv", newline="") as f:
            rows = list(csv.DictReader(f))
    except OSError:
        return None
    timed = rows[skip:]
    if not timed:
        return None
    update_ms = statistics.median(float(r["update_ms"]) for r in timed)
    last = rows[-1]
    run = {"update_ms": update_ms, "samples_per_second": int(timed[0]["batch_samples"]) / (update_ms / 1e3),
           "updates_measured": len(timed),
           "memory": {k[4:]: int(v) for k, v in last.items() if k.startswith("mem_")},
           "device_used_bytes": max(int(r["device_used_bytes"]) for r in rows)}
    match = re.search(r"^memory plan: (\S+ \S+)", "\n".join(read_lines(f"{out}/speed_{name}.log")), re.M)
    run["memory_plan"] = match.group(1) if match else "n/a"
    return run


GPT_SPEED_PRECISIONS = ("fp32", "bf16")
# The GPT speed stages of run.sh: the files' prefix, the model and its description, the batch.
GPT_SPEED_MODELS = {
    "gptspeed": ("GPT L6 H6 C384 T256", "nanoGPT's shakespeare_char, dropout 0", 64),
    "gpt2speed": ("GPT L12 H12 C768 T1024", "GPT-2 small's shape on a byte vocabulary, dropout 0", 8),
}
PRECISION_TEXT = {"fp32": "fp32 (TF32 off)",
                  "bf16": "bf16 mixed precision (trainbench --precision bf16; PyTorch autocast to bf16)"}


def gpt_speed(out, skip, precision, stage="gptspeed"):
    """A GPT speed stage's figures in one precision: trainbench's run (median update_ms after
    `skip` updates, its allocator's peak) and PyTorch's (torch_gpt_throughput.py's JSON, eager and
    compiled); None when the stage did not run."""
    try:
        with open(f"{out}/{stage}_trainbench_{precision}.csv", newline="") as f:
            rows = list(csv.DictReader(f))
    except OSError:
        rows = None
    eager = load_json(f"{out}/{stage}_torch_eager_{precision}.json")
    compiled = load_json(f"{out}/{stage}_torch_compile_{precision}.json")
    if rows is None and eager is None:
        return None
    ours = None
    timed = (rows or [])[skip:]
    if timed:
        update_ms = statistics.median(float(r["update_ms"]) for r in timed)
        first = timed[0]
        tokens_per_sample = round(float(first["tokens_per_second"]) / float(first["samples_per_second"]))
        tokens = int(first["batch_samples"]) * tokens_per_sample
        ours = {"update_ms": update_ms, "tokens_per_update": tokens, "tokens_per_second": tokens / (update_ms / 1e3),
                "updates_measured": len(timed), "peak_bytes": max(int(r["mem_peak_total"]) for r in rows),
                "last_loss": float(rows[-1]["loss"])}
        match = re.search(r"^plan: (.*)$", "\n".join(read_lines(f"{out}/{stage}_trainbench_{precision}.log")), re.M)
        ours["plan"] = match.group(1) if match else "n/a"
    flops = next((r["flops_per_token"] for r in (eager, compiled) if r and "flops_per_token" in r), None)
    return {"trainbench": ours, "eager": eager, "compile": compiled, "flops_per_token": flops, "precision": precision,
            "stage": stage}


def gpt_speed_line(g):
    """One line for run.sh's report: trainbench against PyTorch eager and compiled."""
    ours = g["trainbench"]
    parts = [f"trainbench {ours['update_ms']:.2f} ms/update, {ours['tokens_per_second']:,.0f} tokens/s"
             if ours else "trainbench failed"]
    for label, r in (("torch eager", g["eager"]), ("torch.compile", g["compile"])):
        if r and "ms_per_update" in r:
            ratio = f", trainbench / it {r['ms_per_update'] / ours['update_ms']:.2f}x" if ours else ""
            parts.append(f"{label} {r['ms_per_update']:.2f} ms ({r['tokens_per_second']:,.0f} tokens/s{ratio})")
        elif r:
            parts.append(f"{label} n/a ({r.get('error', '?')[:80]})")
    model, _, batch = GPT_SPEED_MODELS[g["stage"]]
    return f"{model}, batch {batch}, {g['precision']}, on the GPU: " + "; ".join(parts)


def gpt_speed_table(g):
    flops = g["flops_per_token"]
    model, description, batch = GPT_SPEED_MODELS[g["stage"]]
    lines = ["", f"{model} ({description}), batch {batch}, step_size 1, "
             + PRECISION_TEXT[g["precision"]] + ", AdamW, on text from the repository's docs; median update time "
             "after 5 updates"
             + (f"; model FLOPs {flops / 1e6:.1f} M per token (6N + 6LCT)" if flops else "") + ":", "",
             "| run | ms/update | tokens/s | model TFLOP/s | trainbench / this | peak memory (MiB) |",
             "| --- | ---: | ---: | ---: | ---: | ---: |"]
    ours = g["trainbench"]
    rows = [("trainbench", ours and {"ms": ours["update_ms"], "tokens": ours["tokens_per_second"],
                                     "memory": ours["peak_bytes"]})]
    for label, r in (("PyTorch eager", g["eager"]), ("torch.compile", g["compile"])):
        if r is None:
            continue
        rows.append((label, {"ms": r["ms_per_update"], "tokens": r["tokens_per_second"],
                             "memory": r.get("max_memory_allocated_bytes", 0)} if "ms_per_update" in r
                     else {"error": r.get("error", "failed")}))
    for label, r in rows:
        if not r or "error" in r:
            lines.append(f"| {label} | n/a{' (' + r['error'][:60] + ')' if r else ''} | | | | |")
            continue
        tflops = f"{flops * r['tokens'] / 1e12:.1f}" if flops else ""
        ratio = f"{r['ms'] / ours['update_ms']:.2f}x" if ours else ""
        lines.append(f"| {label} | {r['ms']:.2f} | {r['tokens']:,.0f} | {tflops} | {ratio} | {r['memory'] / MIB:,.0f} |")
    if ours:
        lines += ["", f"trainbench's plan: `{ours['plan']}`; PyTorch's memory is `max_memory_allocated`."]
    return lines


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--skip", type=int, default=5, help="warm-up updates left out")
    parser.add_argument("--gpt-speed-line", choices=GPT_SPEED_PRECISIONS,
                        help="print only the one-line result of a GPT speed stage in this precision "
                             "(for run.sh's report)")
    parser.add_argument("--stage", choices=tuple(GPT_SPEED_MODELS), default="gptspeed",
                        help="the GPT speed stage --gpt-speed-line reports")
    args = parser.parse_args()
    if args.gpt_speed_line:
        g = gpt_speed(args.out, args.skip, args.gpt_speed_line, args.stage)
        print(gpt_speed_line(g) if g else f"{args.stage} {args.gpt_speed_line}: no results")
        return
    torch_results = load_json(f"{args.out}/torch.json") or {
        "device": "unknown (no torch.json)", "torch": "n/a", "eager": {}, "compile": {},
        "bf16_gemm_peak_tflops": float("nan")}
    products = load_json(f"{args.out}/products.json")
    device = read_lines(f"{args.out}/device.txt")
    checks = read_lines(f"{args.out}/checks.txt")
    flops = model_flops_per_update(BATCH)
    torch_peak = torch_results["bf16_gemm_peak_tflops"]
    own_peak = products["results"]["bf16"]["square_tflops"] if products else float("nan")
    # MFU against the higher of the two measured bf16 peaks, so no figure flatters the engine.
    peak = max((p for p in (torch_peak, own_peak) if not math.isnan(p)), default=float("nan"))

    def peak_text(value):  # a peak this call did not measure (its stage did not run) says so
        return "not measured in this call" if math.isnan(value) else f"{value:.0f} TFLOP/s"

    lines = [f"Device: {device[0] if device else '?'}; {device[1] if len(device) > 1 else ''}; "
             f"torch {torch_results['torch']}",
             f"MLP {'-'.join(map(str, SIZES))}, batch {BATCH}, SGD, data on the device; "
             f"{flops / 1e9:.0f} GFLOP per update; bf16 GEMM peak 8192^3 on random data: "
             f"torch.matmul {peak_text(torch_peak)}, trainbench's cuBLASLt {peak_text(own_peak)}; "
             f"MFU and % of peak are against the higher, {peak_text(peak)}", "",
             "| precision | step_size | trainbench ms/update | samples/s | TFLOP/s | MFU (bf16 peak) "
             "| torch eager ms | trainbench / eager | torch.compile ms |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    summary = {"torch": torch_results, "products": products, "trainbench": {}, "checks": checks,
               "device": device}
    for name, (precision, step_size) in SPEED_RUNS.items():
        ours = trainbench_run(args.out, name, args.skip)
        eager = torch_results["eager"].get(precision, {}) if step_size == 1 else {}
        compiled = torch_results["compile"].get(precision, {}) if step_size == 1 else {}
        eager_text = f"{eager['update_ms']:.2f}" if "update_ms" in eager else "n/a"
        compiled_text = (f"{compiled['update_ms']:.2f}" if "update_ms" in compiled
                         else "n/a (" + compiled.get("error", "not run")[:60] + ")" if step_size == 1 else "")
        if ours is None:
            lines.append(f"| {precision} | {step_size} | failed | | | | {eager_text} | | {compiled_text} |")
            continue
        tflops = flops / (ours["update_ms"] / 1e3) / 1e12
        ours["tflops"] = tflops
        summary["trainbench"][name] = ours
        ratio = f"{eager['update_ms'] / ours['update_ms']:.2f}x" if "update_ms" in eager else ""
        lines.append(f"| {precision} | {step_size} | {ours['update_ms']:.2f} | {ours['samples_per_second']:,.0f} | "
                     f"{tflops:.0f} | {100 * tflops / peak:.0f}% | {eager_text} | {ratio} | {compiled_text} |")

    for stage in GPT_SPEED_MODELS:
        key = "gpt_speed" if stage == "gptspeed" else "gpt2_speed"
        summary[key] = {}
        for precision in GPT_SPEED_PRECISIONS:
            gpt = gpt_speed(args.out, args.skip, precision, stage)
            summary[key][precision] = gpt
            if gpt:
                lines += gpt_speed_table(gpt)

    if products:
        lines += ["", "The engine's products alone (GemmRunner over cuBLASLt, one update's forward, dW and dX "
                  "at batch 4096, median of 20 calls each):", "",
                  "| precision | 8192^3 TFLOP/s | products ms/update (fwd / dW / dX) | products TFLOP/s "
                  "| % of bf16 peak |", "| --- | ---: | ---: | ---: | ---: |"]
        for precision, r in products["results"].items():
            lines.append(f"| {precision} | {r['square_tflops']:.0f} | {r['update_products_ms']:.3f} "
                         f"({r['forward_ms']:.3f} / {r['weight_grad_ms']:.3f} / {r['input_grad_ms']:.3f}) | "
                         f"{r['update_products_tflops']:.0f} | {100 * r['update_products_tflops'] / peak:.0f}% |")

    lines += ["", "Memory (MiB): trainbench's plan, its allocator (by category, after an update; peak = live + "
              "cache at the worst moment) and the driver; PyTorch's allocator and the driver for the same model:", "",
              "| precision | plan | allocator peak | params / master / grads / workspace | device used "
              "| torch max allocated | torch params | torch max reserved | torch device used |",
              "| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: |"]
    for name, (precision, step_size) in SPEED_RUNS.items():
        ours = summary["trainbench"].get(name)
        if ours is None:
            continue
        m = ours["memory"]
        t = torch_results["eager"].get(precision, {}).get("memory", {}) if step_size == 1 else {}
        torch_cells = (f"{t['max_allocated_bytes'] / MIB:,.0f} | {t['parameter_bytes'] / MIB:,.0f} | "
                       f"{t['max_reserved_bytes'] / MIB:,.0f} | {t['device_used_bytes'] / MIB:,.0f}"
                       if t else " | | | ")
        lines.append(f"| {precision} (step_size {step_size}) | {ours['memory_plan']} | {m['peak_total'] / MIB:,.0f} | "
                     f"{m['parameters'] / MIB:,.0f} / {m['master_weights'] / MIB:,.0f} / {m['gradients'] / MIB:,.0f} / "
                     f"{m['workspace'] / MIB:,.0f} | {ours['device_used_bytes'] / MIB:,.0f} | {torch_cells} |")

    split = {precision: r.get("memory", {}).get("by_category") for precision, r in torch_results["eager"].items()}
    if any(split.values()):
        order = ["parameter", "gradient", "optimizer_state", "activation", "temporary", "input",
                 "autograd_detail", "unknown"]
        lines += ["", "PyTorch's own split at the peak of an update (its profiler's memory timeline), MiB:", "",
                  "| precision | " + " | ".join(order) + " | peak |", "| --- |" + " ---: |" * (len(order) + 1)]
        for precision, by_category in split.items():
            if not by_category:
                continue
            if "error" in by_category:
                lines.append(f"| {precision} | n/a: {by_category['error'][:80]} |")
                continue
            at_peak = by_category["at_peak"]
            lines.append(f"| {precision} | " + " | ".join(f"{at_peak.get(c, 0) / MIB:,.1f}" for c in order) +
                         f" | {by_category['peak_bytes'] / MIB:,.1f} |")

    failed = [c for c in checks if not c.startswith("PASS")]
    lines += ["", f"Checks: {len(checks) - len(failed)} passed, {len(failed)} failed"]
    lines += [f"- {c}" for c in checks]
    information = read_lines(f"{args.out}/information.txt")
    if information:
        lines += ["", "Measured for information (not pass/fail):"] + [f"- {line}" for line in information]
    summary["information"] = information
    text = "\n".join(lines)
    with open(f"{args.out}/results.md", "w") as f:
        f.write(text + "\n")
    with open(f"{args.out}/results.json", "w") as f:
        json.dump(summary, f, indent=2)
    print(text)


if __name__ == "__main__":
    main()
