#!/bin/bash
# Full fine-tuning against LoRA, QLoRA (4-bit base) and DoRA, as a user would run them: a GPT
# pretrained on the King James Bible (Debian's bible-kjv) is fine-tuned on another text (the GPL
# from base-files) for the same updates, in fp32 and bf16. Per run: the trainable parameters,
# the measured memory by category at the update's peak (the engine's allocator), the median
# update time and the final validation loss. Prints a markdown table (docs/BENCHMARKS.md).
#
#   bench/peft_finetune.sh [BUILD_DIR] [UPDATES]
set -euo pipefail
BUILD=${1:-build}
UPDATES=${2:-60}
CLI=$BUILD/app/trainbench-cli
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
SHAPE=(--model gpt --n-layer 4 --n-head 4 --n-embd 256 --block-size 64 --batch-size 16 --sample-chars 0 --eval-samples 256)

"$CLI" train "${SHAPE[@]}" --dataset kjv --max-steps 200 --save-weights "$WORK/kjv.safetensors" > "$WORK/pretrain.log"
grep -E "^validation" "$WORK/pretrain.log" | tail -1 | sed 's/^/pretrained on KJV: /' >&2

run() {  # name precision flags...
    local name=$1 precision=$2
    shift 2
    "$CLI" train "${SHAPE[@]}" --dataset text:/usr/share/common-licenses/GPL-3 --init-weights "$WORK/kjv.safetensors" \
        --max-steps "$UPDATES" --epochs 100 --lr 3e-3 --precision "$precision" --metrics-out "$WORK/$name-$precision.csv" \
        "$@" > "$WORK/$name-$precision.log"
}
for precision in fp32 bf16; do
    run full "$precision" --lr 3e-4
    run lora "$precision" --lora-rank 8
    run qlora "$precision" --lora-rank 8 --lora-base nf4
    run dora "$precision" --lora-rank 8 --dora
done

/usr/bin/python3 - "$WORK" "$UPDATES" <<'PY'
import csv, re, statistics, sys
work, updates = sys.argv[1], int(sys.argv[2])
def mib(b): return "%.2f" % (int(b) / 1048576)
print("| run | precision | trainable | parameters | gradients | optimizer state | master weights | activations | workspace | peak (MiB) | update ms (median) | final validation loss |")
print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
for precision in ("fp32", "bf16"):
    for name, label in (("full", "full fine-tuning (lr 3e-4)"), ("lora", "LoRA r8"), ("qlora", "QLoRA r8 (NF4 base)"), ("dora", "DoRA r8")):
        rows = list(csv.DictReader(open("%s/%s-%s.csv" % (work, name, precision))))
        log = open("%s/%s-%s.log" % (work, name, precision)).read()
        m = re.search(r"\(([0-9]+) parameters(?:, ([0-9]+) of them trainable)?", log)
        trainable = m.group(2) or m.group(1)
        peak = max(rows, key=lambda r: int(r["mem_update_peak_live"] or 0))
        times = [float(r["update_ms"]) for r in rows[3:] if r["update_ms"]]
        val = [r["val_loss"] for r in rows if r["val_loss"]]
        cats = ["parameters", "gradients", "optimizer_state", "master_weights", "activations", "workspace"]
        print("| %s | %s | %s | %s | %.2f | %.1f | %s |" % (label, precision, trainable,
              " | ".join(mib(peak["mem_update_peak_" + c]) for c in cats), int(peak["mem_update_peak_live"]) / 1048576,
              statistics.median(times), val[-1] if val else "-"))
PY
