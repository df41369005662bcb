#!/usr/bin/env python3
"""Writes the seed corpora fuzz/corpus/<harness>/ from the test fixtures (docs/RELIABILITY.md).

    python3 fuzz/make_corpus.py [--checkpoint-harness BUILD/fuzz/fuzz_checkpoint]

Seeds are small on purpose (a few KB per harness): libFuzzer mutates them, and a large seed
only slows each execution. The checkpoint seed is written by the harness itself (the real
checkpoint writer on the harness's run), so it is only regenerated when the harness is given.
"""
import argparse
import gzip
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(ROOT, "fuzz", "corpus")
FIXTURES = os.path.join(ROOT, "tests", "fixtures")


def put(harness, name, data):
    folder = os.path.join(CORPUS, harness)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def fixture(*parts):
    with open(os.path.join(FIXTURES, *parts), "rb") as f:
        return f.read()


def idx_images(count, rows, columns):
    pixels = bytes((i * 37 + 11) % 256 for i in range(count * rows * columns))
    return struct.pack(">IIII", 0x803, count, rows, columns) + pixels


def idx_labels(labels):
    return struct.pack(">II", 0x801, len(labels)) + bytes(labels)


def safetensors(tensors, metadata=None):
    header, data = {}, b""
    if metadata:
        header["__metadata__"] = metadata
    for name, shape, values in tensors:
        begin = len(data)
        data += struct.pack("<%df" % len(values), *values)
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [begin, len(data)]}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + data


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--checkpoint-harness", help="built fuzz_checkpoint, to rewrite its seed")
    args = parser.parse_args()

    # CSV: the fixtures (classification, regression) and the shapes the reader must refuse.
    put("fuzz_csv", "three_clusters.csv", fixture("data", "three_clusters.csv")[:1024])
    put("fuzz_csv", "noisy_line.csv", fixture("data", "noisy_line.csv"))
    put("fuzz_csv", "spaces_plus_crlf.csv", "a, b ,label\r\n+1.5, -2e3, 1\r\n\r\n0x1,inf,0\r\n")
    put("fuzz_csv", "ragged.csv", "f,t\n1,2,3\n")

    # IDX: images and labels, plain and gzip (fuzz_idx takes the file's bytes as they are).
    for name, data in [("images-2x3x3", idx_images(2, 3, 3)), ("images-1x28x28", idx_images(1, 28, 28)),
                       ("labels-5", idx_labels([0, 9, 3, 3, 7]))]:
        put("fuzz_idx", name, data)
        put("fuzz_idx", name + ".gz", gzip.compress(data, mtime=0))
        put("fuzz_idx_gzip", name, data)  # fuzz_idx_gzip compresses its input itself

    # safetensors: the PyTorch-written fixture, an empty tensor with metadata, a tiny GPT.
    put("fuzz_safetensors", "mlp_3_4_2.safetensors", fixture("safetensors", "mlp_3_4_2.safetensors"))
    put("fuzz_safetensors", "empty_tensor.safetensors",
        safetensors([("empty", [0, 3], []), ("scalar", [], [1.5])], {"format": "pt"}))
    gpt = [("transformer.wte.weight", [5, 4], [0.1] * 20), ("transformer.wpe.weight", [4, 4], [0.2] * 16),
           ("lm_head.weight", [5, 4], [0.1] * 20)]
    put("fuzz_safetensors", "tied_head.safetensors", safetensors(gpt))

    # Config JSON: the app's presets and a few edge shapes of the format.
    presets = os.path.join(ROOT, "resources", "presets")
    for name in sorted(os.listdir(presets)):
        with open(os.path.join(presets, name)) as f:
            put("fuzz_config_json", name, json.dumps(json.load(f).get("config", {}), indent=1))
    put("fuzz_config_json", "gpt.json", '{"model": "gpt", "dataset": "kjv", "n_layer": 2, "optimizer": "adamw", '
        '"schedule": {"kind": "cosine", "warmup_steps": 10}, "memory_limit_bytes": "512MiB"}')
    put("fuzz_config_json", "nulls.json", '{"optimizer": {"kind": "adam", "lr": null, "beta1": 0.5}, '
        '"hidden": [3, 1], "seed": 18446744073709551615}')

    # Text corpora: plain text, and the kinds of bytes the binary check looks at.
    put("fuzz_text_corpus", "hamlet.txt", fixture("text", "hamlet.txt"))
    put("fuzz_text_corpus", "bible_plain.txt", fixture("text", "bible_plain.txt"))
    put("fuzz_text_corpus", "latin1_tabs.txt", b"caf\xe9\tna\xefve\r\n\x1b[0m\fend\n" * 4)

    # The `bible` program's output, as data/kjv_corpus.cpp reads it.
    put("fuzz_bible_output", "bible_wrapped.txt", fixture("text", "bible_wrapped.txt"))
    put("fuzz_bible_output", "books.txt", "1Chr3:4 And the sons\r\n\nPsa117:2 For his merciful\n  kindness\nRev22:21 The grace")

    if args.checkpoint_harness:
        with tempfile.TemporaryDirectory() as folder:
            env = dict(os.environ, TRAINBENCH_FUZZ_WRITE_SEED=folder)
            subprocess.run([args.checkpoint_harness], env=env, check=True)
            with open(os.path.join(folder, "latest.safetensors"), "rb") as f:
                put("fuzz_checkpoint", "after_3_updates.safetensors", f.read())
    elif not os.path.isdir(os.path.join(CORPUS, "fuzz_checkpoint")):
        sys.exit("no fuzz/corpus/fuzz_checkpoint yet: run again with --checkpoint-harness BUILD/fuzz/fuzz_checkpoint")


if __name__ == "__main__":
    main()
