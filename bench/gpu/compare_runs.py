#!/usr/bin/env python3
"""Compares two trainbench-cli runs: per-update losses and validation losses (metrics CSV,
matched by update number, so a resumed run's rows are compared with the same updates of a
straight run) and final weights (safetensors), as the maximum relative error of the losses and
the norm-wise relative error of all weights. With --exact, nothing but identical bits passes.
Prints one PASS/FAIL line and exits non-zero on FAIL."""
import argparse
import csv
import json
import math
import struct
import sys


def read_rows(path):
    with open(path, newline="") as f:
        return {int(row["update"]): row for row in csv.DictReader(f)}


def read_safetensors_with_shapes(path):
    """({name: flat float values}, {name: shape}) of an all-F32 safetensors file."""
    with open(path, "rb") as f:
        (header_len,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(header_len))
        data = f.read()
    tensors, shapes = {}, {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info["dtype"] != "F32":
            raise SystemExit(f"{path}: {name} is {info['dtype']}, expected F32")
        begin, end = info["data_offsets"]
        tensors[name] = struct.unpack(f"<{(end - begin) // 4}f", data[begin:end])
        shapes[name] = info["shape"]
    return tensors, shapes


def read_safetensors(path):
    return read_safetensors_with_shapes(path)[0]


def weight_errors(reference, candidate):
    """Norm-wise relative error over all tensors, and how many values differ at all."""
    if set(reference) != set(candidate):
        raise SystemExit(f"tensor names differ: {sorted(set(reference) ^ set(candidate))}")
    diff = norm = 0.0
    differing = 0
    for name, ref in reference.items():
        cand = candidate[name]
        if len(cand) != len(ref):
            raise SystemExit(f"{name}: {len(cand)} values vs {len(ref)}")
        for a, b in zip(cand, ref):
            diff += (a - b) ** 2
            norm += b * b
            differing += a != b or (math.isnan(a) != math.isnan(b))
    return math.sqrt(diff) / max(math.sqrt(norm), 1e-30), differing


def relative(a, b):
    return abs(a - b) / max(abs(b), 1e-30)


def errors(reference_prefix, candidate_prefix):
    """(losses, validation losses, max loss rel. err, weights rel. err, weight values differing),
    or None when the candidate has updates the reference lacks."""
    reference, candidate = read_rows(reference_prefix + ".csv"), read_rows(candidate_prefix + ".csv")
    if not candidate or set(candidate) - set(reference):
        return None
    losses = [(float(candidate[u]["loss"]), float(reference[u]["loss"])) for u in sorted(candidate)]
    val_losses = [(float(candidate[u]["val_loss"]), float(reference[u]["val_loss"])) for u in sorted(candidate)
                  if candidate[u].get("val_loss") and reference[u].get("val_loss")]
    loss_err = max(relative(a, b) for a, b in losses + val_losses)
    w_err, differing = weight_errors(read_safetensors(reference_prefix + ".safetensors"),
                                     read_safetensors(candidate_prefix + ".safetensors"))
    return losses, val_losses, loss_err, w_err, differing


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--label", required=True)
    parser.add_argument("--reference", required=True, help="path prefix: PREFIX.csv and PREFIX.safetensors")
    parser.add_argument("--candidate", required=True)
    parser.add_argument("--loss-tol", type=float, default=0.0)
    parser.add_argument("--weight-tol", type=float, default=0.0)
    parser.add_argument("--exact", action="store_true", help="identical losses and weight bits")
    parser.add_argument("--calibration", nargs=2, metavar=("REFERENCE", "CANDIDATE"),
                        help="tolerances = --factor x the errors between these two runs")
    parser.add_argument("--factor", type=float, default=1.0)
    parser.add_argument("--json-out")
    args = parser.parse_args()

    compared = errors(args.reference, args.candidate)
    if compared is None:
        print(f"FAIL {args.label}: the candidate has updates that are not in the reference run")
        return 1
    losses, val_losses, loss_err, w_err, differing = compared
    if args.calibration:
        calibration = errors(*args.calibration)
        args.loss_tol, args.weight_tol = args.factor * calibration[2], args.factor * calibration[3]
    finite = all(math.isfinite(a) for a, _ in losses + val_losses)
    validation = f", {len(val_losses)} validation losses" if val_losses else ""
    if args.exact:
        ok = finite and differing == 0 and all(a == b for a, b in losses + val_losses)
        detail = (f"{len(losses)} updates{validation}: "
                  + ("identical losses and weight bits" if ok else
                     f"max loss rel. err {loss_err:.3g}, {differing} weight values differ (rel. err {w_err:.3g})"))
    else:
        ok = finite and loss_err < args.loss_tol and w_err < args.weight_tol
        detail = (f"{len(losses)} updates{validation}, max loss rel. err {loss_err:.3g} (< {args.loss_tol:.3g}), "
                  f"final weights rel. err {w_err:.3g} (< {args.weight_tol:.3g})")
        if args.calibration:
            detail += f", tolerances {args.factor:g} x the errors of {args.calibration[1].rsplit('/', 1)[-1]} " \
                      f"vs {args.calibration[0].rsplit('/', 1)[-1]}"
    print(f"{'PASS' if ok else 'FAIL'} {args.label}: {detail}")
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump({"label": args.label, "updates": len(losses), "validation_losses": len(val_losses),
                       "loss_rel_err": loss_err, "weight_rel_err": w_err, "weight_values_differing": differing,
                       "exact": args.exact, "loss_tol": args.loss_tol, "weight_tol": args.weight_tol,
                       "pass": ok}, f, indent=2)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
