#!/bin/bash
# Model parallelism on this machine: the benchmark GPT (L4 H4 C128 T128, micro-batches of 2
# windows) cut into 2 pipeline stages, a process each, under GPipe and 1F1B, for m = 1, 2, 4, 8
# and 16 micro-batches per update (step_size m, global batch 2m), beside one process training
# the same batches on one thread and on two (the 2 stages' processes get a thread each). Per run: the median update time; the bubble measured in the
# last update (the stages' mean idle share of the pipeline's span, as the run prints it) against
# GPipe's (P-1)/(m+P-1); each process's live memory peak beside its plan. Prints a markdown
# table (docs/BENCHMARKS.md).
#
#   bench/pipeline_bubble.sh [BUILD_DIR] [UPDATES]
set -euo pipefail
BUILD=${1:-build}
UPDATES=${2:-12}
CLI=$BUILD/app/trainbench-cli
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
SHAPE=(--model gpt --dataset kjv --n-layer 4 --n-head 4 --n-embd 128 --block-size 128 --sample-chars 0 --eval-samples 64
       --epochs 100 --seed 1)

for m in 1 2 4 8 16; do
    common=("${SHAPE[@]}" --batch-size $((2 * m)) --step-size "$m" --max-steps "$UPDATES")
    "$CLI" train "${common[@]}" --threads 1 --metrics-out "$WORK/one-$m.csv" > "$WORK/one-$m.log"
    "$CLI" train "${common[@]}" --threads 2 --metrics-out "$WORK/two-$m.csv" > "$WORK/two-$m.log"
    for schedule in gpipe 1f1b; do
        "$CLI" train "${common[@]}" --pipeline-stages 2 --processes 2 --pipeline-schedule "$schedule" \
            --metrics-out "$WORK/$schedule-$m.csv" > "$WORK/$schedule-$m.log"
    done
done

/usr/bin/python3 - "$WORK" <<'PY'
import csv, re, statistics, sys
work = sys.argv[1]
def median_ms(name):
    rows = list(csv.DictReader(open("%s/%s.csv" % (work, name))))
    return statistics.median(float(r["update_ms"]) for r in rows[2:] if r["update_ms"])
def mib(text): 
    value, unit = text.split()
    return float(value) * {"KiB": 1 / 1024, "MiB": 1, "GiB": 1024}[unit]
print("| m | one process, 1 thread / 2 threads: ms/update; peak MiB | schedule | ms/update | bubble measured | (P-1)/(m+P-1) | stage 1: idle, peak MiB (plan) | stage 2: idle, peak MiB (plan) |")
print("| ---: | --- | --- | ---: | ---: | ---: | --- | --- |")
for m in (1, 2, 4, 8, 16):
    one = open("%s/one-%d.log" % (work, m)).read()
    two = median_ms("two-%d" % m)
    one_peak = re.search(r"peak memory: engine ([0-9.]+ [KMG]iB)", one).group(1)
    for schedule in ("gpipe", "1f1b"):
        log = open("%s/%s-%d.log" % (work, schedule, m)).read()
        bubble = re.search(r"bubble ([0-9.]+)% measured .* = ([0-9.]+)%", log)
        stages = re.findall(r"stage \d: .* idle ([0-9.]+)% of .* memory peak ([0-9.]+ [KMG]iB), plan ([0-9.]+ [KMG]iB)", log)
        cells = ["%s%%, %.2f (%.2f)" % (idle, mib(peak), mib(plan)) for idle, peak, plan in stages]
        print("| %d | %.1f / %.1f ms; %.2f | %s | %.1f | %s%% | %s%% | %s |" % (
            m, median_ms("one-%d" % m), two, mib(one_peak), schedule, median_ms("%s-%d" % (schedule, m)),
            bubble.group(1), bubble.group(2), " | ".join(cells)))
PY
