#!/usr/bin/env bash
# Proves that a change to the engines computes the same bits: trains the same short runs with two
# trainbench-cli binaries (say, one built before a refactor and one after) and compares their
# saved weights byte for byte. The runs cover the engine's paths: the MLP, the GPT and the CNN; fp32,
# bf16 and fp16; gradient checkpointing; --fused off; accumulation; every optimizer, with and
# without weight decay; LoRA, QLoRA and DoRA; a GPT wide enough that its attention, products and
# element-wise ops split across 2 threads, in each precision; and,
# where mpirun is installed, ZeRO-1/2 on 2 processes and 2 pipeline stages.
#
#   scripts/bit_identity.sh BEFORE_CLI AFTER_CLI [--cpu-products eigen|onednn|auto]
#
# Exits 1 naming the runs whose weights differ. Each run is a few updates of a small model: the
# whole matrix takes a few minutes on 2 cores.
set -uo pipefail
if [ $# -lt 2 ]; then
    echo "usage: $0 BEFORE_CLI AFTER_CLI [extra train flags]" >&2
    exit 2
fi
before=$1
after=$2
shift 2
extra=("$@")
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
text="text:$here/tests/fixtures/text/bible_plain.txt"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

common=(--epochs 100 --max-steps 4 --seed 7 --threads 1 --lr 0.003)
mlp=(--dataset spirals --samples 160 --hidden 32,32 --batch-size 32 "${common[@]}")
gpt=(--model gpt --dataset "$text" --n-layer 2 --n-head 2 --n-embd 16 --block-size 16 --batch-size 8 "${common[@]}")
# Wide enough that attention, the products and the element-wise ops split across 2 threads.
gpt_wide=(--model gpt --dataset "$text" --n-layer 1 --n-head 4 --n-embd 64 --block-size 32 --batch-size 32 "${common[@]}")
cnn=(--model cnn --dataset fashion-mnist --channels 4,8 --hidden 16 --batch-size 16 "${common[@]}")

runs=()
add() { runs+=("$*"); }
for model in mlp gpt; do
    for precision in fp32 bf16 fp16; do
        add "$model --precision $precision"
        add "$model --precision $precision --step-size 2 --gradient-checkpointing"
        add "$model --precision $precision --fused off"
    done
done
add "gpt --lora-rank 4"
add "gpt --lora-rank 4 --lora-base nf4 --precision bf16"
add "gpt --lora-rank 4 --dora"
add "mlp --optimizer sgd --momentum 0.9 --step-size 4"
add "mlp --optimizer sgd --weight-decay 0.01"
add "mlp --optimizer adam --weight-decay 0.01"
add "mlp --optimizer rmsprop --momentum 0.9 --weight-decay 0.01"
add "mlp --optimizer rmsprop"
add "mlp --optimizer adagrad --weight-decay 0.01"
add "gpt --optimizer adamw --weight-decay 0.1 --fused off"
for precision in fp32 bf16 fp16; do
    add "gpt_wide --precision $precision --threads 2"
done
if [ -d /usr/share/datasets/fashion-mnist ]; then
    add "cnn --precision fp32"
    add "cnn --precision bf16 --gradient-checkpointing"
else
    echo "skipping the CNN: needs Debian's dataset-fashion-mnist" >&2
fi
if command -v mpirun >/dev/null; then
    add "mlp --processes 2 --zero 1"
    add "mlp --processes 2 --zero 2 --step-size 2"
    add "gpt --processes 2 --zero 2"
    add "gpt --processes 2 --pipeline-stages 2 --step-size 2"
fi

failed=()
for run in "${runs[@]}"; do
    read -r model rest <<<"$run"
    # shellcheck disable=SC2206
    flags=($rest)
    case $model in
        mlp) base=("${mlp[@]}") ;;
        gpt) base=("${gpt[@]}") ;;
        gpt_wide) base=("${gpt_wide[@]}") ;;
        cnn) base=("${cnn[@]}") ;;
    esac
    for side in before after; do
        cli=$before
        [ "$side" = after ] && cli=$after
        if ! "$cli" train "${base[@]}" "${flags[@]}" "${extra[@]}" --save-weights "$work/$side.safetensors" \
            >"$work/$side.log" 2>&1; then
            echo "FAILED to run ($side): $run" >&2
            tail -3 "$work/$side.log" >&2
            failed+=("$run")
            continue 2
        fi
    done
    if cmp -s "$work/before.safetensors" "$work/after.safetensors"; then
        echo "same bits: $run"
    else
        echo "DIFFERENT: $run"
        failed+=("$run")
    fi
done
if [ ${#failed[@]} -gt 0 ]; then
    printf 'differ or failed: %s\n' "${failed[@]}"
    exit 1
fi
echo "all ${#runs[@]} runs: the same bits"
