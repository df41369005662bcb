#!/usr/bin/env python3
"""Where two weight files differ: the norm-wise relative error of each tensor and, for the
tensor that holds most of the difference, the row (output unit) that holds most of it.

Used on one update taken by the CPU and the CUDA engine from the same checkpoint: rounding
spreads a difference of ~1e-7 over every tensor, while a ReLU pre-activation that rounding puts
on the other side of zero switches one (unit, sample) term of the gradient on or off, which
concentrates the difference in that unit's row of its layer (and, through backprop, the layers
below it) and leaves the layers above untouched. Prints one INFO line."""
import argparse
import math
import sys

from compare_runs import read_safetensors_with_shapes, weight_errors


def norm(values):
    return math.sqrt(sum(v * v for v in values))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--label", required=True)
    parser.add_argument("--reference", required=True, help="safetensors file")
    parser.add_argument("--candidate", required=True)
    args = parser.parse_args()
    reference, shapes = read_safetensors_with_shapes(args.reference)
    candidate, _ = read_safetensors_with_shapes(args.candidate)
    total_err, differing = weight_errors(reference, candidate)
    per_tensor = []
    for name, ref in reference.items():
        diff = [a - b for a, b in zip(candidate[name], ref)]
        per_tensor.append((norm(diff) / max(norm(ref), 1e-30), name, diff))
    parts = ", ".join(f"{name} {err:.1e}" for err, name, _ in per_tensor)
    worst_err, worst_name, worst_diff = max(per_tensor)
    detail = ""
    shape = shapes[worst_name]
    if len(shape) == 2 and differing > 0:
        rows, cols = shape
        row_norms = [norm(worst_diff[r * cols:(r + 1) * cols]) for r in range(rows)]
        top = max(range(rows), key=lambda r: row_norms[r])
        share = row_norms[top] ** 2 / max(sum(x * x for x in row_norms), 1e-300)
        detail = f"; {100 * share:.0f}% of {worst_name}'s difference is in row {top} of {rows}"
    print(f"INFO {args.label}: weights rel. err {total_err:.2e} "
          f"(by tensor: {parts}){detail}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
