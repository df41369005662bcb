"""The two benchmark models' trainbench-cli flags, which every bench/ script that times our own
training runs uses: nanoGPT's GPT L4 H4 C128 T128 on the KJV (batch 32, AdamW lr 1e-3 constant)
and the 784-1024-1024-10 ReLU MLP on Fashion-MNIST (batch 256, Adam lr 1e-3), step_size 1 both."""

GPT = ["--model", "gpt", "--dataset", "kjv", "--n-layer", "4", "--n-head", "4", "--n-embd", "128", "--block-size", "128",
       "--batch-size", "32", "--step-size", "1", "--optimizer", "adamw", "--lr", "1e-3", "--schedule", "constant",
       "--warmup-steps", "0", "--sample-chars", "0", "--eval-every", "0"]
MLP = ["--dataset", "fashion-mnist", "--hidden", "1024,1024", "--batch-size", "256", "--step-size", "1",
       "--optimizer", "adam", "--lr", "1e-3"]
MODELS = {"gpt": GPT, "mlp": MLP}


def run_flags(model, precision, threads):
    """A benchmark model's `trainbench-cli train` flags in one precision on `threads` threads,
    its data in order from seed 1, as every timed run of ours takes them."""
    return [*MODELS[model], "--precision", precision, "--threads", str(threads), "--no-shuffle", "--seed", "1"]

# Updates per turn where runs take turns (bench/turns.py): the GPT's take 50-100 ms, the MLP's 5-10.
TURN = {"gpt": 6, "mlp": 40}
