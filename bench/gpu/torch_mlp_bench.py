#!/usr/bin/env python3
"""PyTorch on the same GPU, the same model and batch as trainbench's CUDA benchmark: an MLP
784-4096-4096-4096-10 with ReLU, softmax cross-entropy, SGD, batch 4096, in fp32 (TF32 off,
as trainbench's fp32 is true fp32), bf16 autocast and fp16 autocast with GradScaler (fp32
master weights in both, as trainbench). Data sits on the GPU already (trainbench runs with
--preload-device). Also the bf16 GEMM peak: torch.matmul 8192^3 on random data, and the
memory PyTorch's allocator and the driver report for each eager run. Writes JSON."""
import argparse
import json
import time

import torch
import torch.nn as nn

from benchmark_model import BATCH, SIZES, model_flops_per_update


def make_model():
    layers = []
    for l, (i, o) in enumerate(zip(SIZES[:-1], SIZES[1:])):
        layers.append(nn.Linear(i, o))
        if l + 2 < len(SIZES):
            layers.append(nn.ReLU())
    return nn.Sequential(*layers).cuda()


def time_training(precision, batch, steps, warmup, compiled):
    torch.manual_seed(0)
    model = make_model()
    step_model = torch.compile(model) if compiled else model
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.rand(batch, SIZES[0], device="cuda")
    y = torch.randint(0, SIZES[-1], (batch,), device="cuda")
    loss_fn = nn.CrossEntropyLoss()
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
    scaler = torch.amp.GradScaler("cuda") if precision == "fp16" else None

    def update():
        optimizer.zero_grad(set_to_none=True)
        if dtype is None:
            loss = loss_fn(step_model(x), y)
        else:
            with torch.autocast("cuda", dtype=dtype):
                loss = loss_fn(step_model(x), y)
        if scaler:
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        else:
            loss.backward()
            optimizer.step()
        return loss

    for _ in range(warmup):
        update()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(steps):
        update()
    stop.record()
    torch.cuda.synchronize()
    ms = start.elapsed_time(stop) / steps
    free, total = torch.cuda.mem_get_info()
    # What PyTorch's allocator can tell: the peak of the timed updates, and what stays between
    # updates (parameters, and the gradients until the next zero_grad sets them to None).
    memory = {"parameter_bytes": sum(p.numel() * p.element_size() for p in model.parameters()),
              "batch_bytes": x.numel() * x.element_size() + y.numel() * y.element_size(),
              "max_allocated_bytes": torch.cuda.max_memory_allocated(),
              "allocated_after_update_bytes": torch.cuda.memory_allocated(),
              "max_reserved_bytes": torch.cuda.max_memory_reserved(),
              "device_used_bytes": total - free}
    if not compiled:
        memory["by_category"] = memory_by_category(update)
    result = {"update_ms": ms, "samples_per_second": batch / (ms / 1000.0),
              "tflops": model_flops_per_update(batch) / (ms / 1000.0) / 1e12, "memory": memory}
    del model, step_model, optimizer, x, y, scaler
    torch.cuda.empty_cache()
    return result


def memory_by_category(step, device="cuda:0"):
    """PyTorch's own split of its memory by category (parameter, gradient, activation, temporary,
    optimizer state, ...) at the peak of one update, from the profiler's memory timeline (what
    its memory snapshot tools draw). `step` runs one whole update. The timeline is a private
    API, so a failure is returned as the error, not raised."""
    try:
        from torch.profiler._memory_profiler import _CATEGORY_TO_INDEX, MemoryProfileTimeline

        activities = [torch.profiler.ProfilerActivity.CPU]
        if device.startswith("cuda"):
            activities.append(torch.profiler.ProfilerActivity.CUDA)
        with torch.profiler.profile(activities=activities, profile_memory=True, record_shapes=True,
                                    with_stack=True) as profiler:
            step()
        _, sizes = MemoryProfileTimeline(profiler._memory_profile())._coalesce_timeline(device)
        peak = max(range(len(sizes)), key=lambda i: sum(sizes[i]))
        # Category c's bytes are in column _CATEGORY_TO_INDEX[c] + 1 (column 0 is spare), as the
        # profiler's own plot reads them; a row without the spare column starts at 0.
        offset = len(sizes[peak]) - len(_CATEGORY_TO_INDEX)
        names = {index + offset: category.name.lower() if category is not None else "unknown"
                 for category, index in _CATEGORY_TO_INDEX.items()}
        return {"peak_bytes": sum(sizes[peak]),
                "at_peak": {names[i]: size for i, size in enumerate(sizes[peak]) if i in names}}
    except Exception as error:  # noqa: BLE001 - a private API may change between versions
        return {"error": f"{type(error).__name__}: {error}"[:300]}


def bf16_gemm_peak(n=8192, reps=50):
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    for _ in range(5):
        torch.matmul(a, b)
    torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        torch.matmul(a, b)
    stop.record()
    torch.cuda.synchronize()
    seconds = start.elapsed_time(stop) / 1000.0 / reps
    return 2 * n ** 3 / seconds / 1e12


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch", type=int, default=BATCH)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--out", required=True)
    parser.add_argument("--no-compile", action="store_true")
    args = parser.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False

    results = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
               "batch": args.batch, "sizes": SIZES,
               "flops_per_update": model_flops_per_update(args.batch),
               "bf16_gemm_peak_tflops": bf16_gemm_peak(), "eager": {}, "compile": {}}
    def save():  # after every measurement, so a run stopped by its time limit keeps what it measured
        with open(args.out, "w") as f:
            json.dump(results, f, indent=2)

    for precision in ("fp32", "bf16", "fp16"):
        results["eager"][precision] = time_training(precision, args.batch, args.steps, args.warmup, False)
        print(f"torch eager {precision}: {results['eager'][precision]}", flush=True)
        save()
    if not args.no_compile:
        for precision in ("fp32", "bf16", "fp16"):
            try:
                t0 = time.time()
                results["compile"][precision] = time_training(precision, args.batch, args.steps,
                                                              args.warmup, True)
                results["compile"][precision]["compile_and_run_seconds"] = time.time() - t0
                print(f"torch.compile {precision}: {results['compile'][precision]}", flush=True)
            except Exception as error:  # torch.compile needs a working Triton toolchain
                results["compile"][precision] = {"error": f"{type(error).__name__}: {error}"[:300]}
                print(f"torch.compile {precision} failed: {results['compile'][precision]['error']}", flush=True)
            save()


if __name__ == "__main__":
    main()
