#!/usr/bin/env python3
"""Compares two trainbench-cli runs: per-update losses (metrics CSV) and final weights
(safetensors), as the maximum relative error of the losses and the norm-wise relative error
of all weights. Prints one PASS/FAIL line and exits non-zero on FAIL."""
import argparse
import csv
import json
import math
import struct
import sys


def read_losses(path):
    with open(path, newline="") as f:
        return [float(row["loss"]) for row in csv.DictReader(f)]


def read_safetensors(path):
    with open(path, "rb") as f:
        (header_len,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(header_len))
        data = f.read()
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info["dtype"] != "F32":
            raise SystemExit(f"{path}: {name} is {info['dtype']}, expected F32")
        begin, end = info["data_offsets"]
        count = (end - begin) // 4
        tensors[name] = struct.unpack(f"<{count}f", data[begin:end])
    return tensors


def weight_error(reference, candidate):
    diff = norm = 0.0
    for name, ref in reference.items():
        cand = candidate[name]
        if len(cand) != len(ref):
            raise SystemExit(f"{name}: {len(cand)} values vs {len(ref)}")
        for a, b in zip(cand, ref):
            diff += (a - b) ** 2
            norm += b * b
    return math.sqrt(diff) / max(math.sqrt(norm), 1e-30)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--label", required=True)
    parser.add_argument("--reference", required=True, help="path prefix: PREFIX.csv and PREFIX.safetensors")
    parser.add_argument("--candidate", required=True)
    parser.add_argument("--loss-tol", type=float, required=True)
    parser.add_argument("--weight-tol", type=float, required=True)
    parser.add_argument("--json-out")
    args = parser.parse_args()

    ref_losses = read_losses(args.reference + ".csv")
    cand_losses = read_losses(args.candidate + ".csv")
    if len(ref_losses) != len(cand_losses) or not ref_losses:
        print(f"FAIL {args.label}: {len(cand_losses)} updates vs {len(ref_losses)}")
        return 1
    loss_err = max(abs(a - b) / max(abs(b), 1e-30) for a, b in zip(cand_losses, ref_losses))
    w_err = weight_error(read_safetensors(args.reference + ".safetensors"),
                         read_safetensors(args.candidate + ".safetensors"))
    ok = loss_err < args.loss_tol and w_err < args.weight_tol and all(map(math.isfinite, cand_losses))
    print(f"{'PASS' if ok else 'FAIL'} {args.label}: {len(ref_losses)} updates, max loss rel. err "
          f"{loss_err:.3g} (< {args.loss_tol:g}), final weights rel. err {w_err:.3g} (< {args.weight_tol:g})")
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump({"label": args.label, "updates": len(ref_losses), "loss_rel_err": loss_err,
                       "weight_rel_err": w_err, "loss_tol": args.loss_tol,
                       "weight_tol": args.weight_tol, "pass": ok}, f, indent=2)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
