"""The data readers the PyTorch peers share (torch_mlp_throughput.py, torch_gpt_throughput.py,
torch_ddp_throughput.py), reading what TrainBench reads the same way. Import it after the
script has fixed its thread counts: it imports torch."""
import gzip
import os
import struct
import sys

import torch


def read_idx(path):
    """An IDX file (gzip), as a uint8 tensor: [count, rest] for images, [count] for labels."""
    with gzip.open(path, "rb") as f:
        raw = f.read()
    magic, = struct.unpack(">I", raw[:4])
    dims = magic & 0xFF
    shape = struct.unpack(">" + "I" * dims, raw[4:4 + 4 * dims])
    data = torch.frombuffer(bytearray(raw[4 + 4 * dims:]), dtype=torch.uint8)
    return data.reshape(shape[0], -1) if dims > 1 else data


def kjv_cache_path():
    """Where trainbench-cli keeps the extracted King James Bible (data/kjv_corpus.hpp)."""
    cache = os.environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(cache):
        cache = os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "trainbench", "kjv.txt")


def text_training_tokens(spec):
    """For --dataset kjv or text:PATH: (token ids of the training split as int64, vocabulary
    size, text size in bytes), as TrainBench's text corpus makes them. Exits with one line when
    the text is missing or the spec unknown."""
    if spec == "kjv":
        path = kjv_cache_path()
        if not os.path.exists(path):
            sys.exit(f"{path} is missing: run `trainbench-cli train --model gpt --dataset kjv --max-steps 1` "
                     "once, which extracts it, or give --dataset text:PATH")
    elif spec.startswith("text:"):
        path = spec[len("text:"):]
    else:
        sys.exit(f"unknown --dataset {spec!r}: use kjv or text:PATH")
    with open(path, "rb") as f:
        text = f.read()
    # nanoGPT's shakespeare_char vocabulary, as TrainBench's text corpus: sorted distinct bytes;
    # the first 90% of the tokens train.
    vocabulary = sorted(set(text))
    id_of = torch.zeros(256, dtype=torch.long)
    id_of[torch.tensor(vocabulary)] = torch.arange(len(vocabulary))
    train = text[:len(text) * 9 // 10]
    return id_of[torch.frombuffer(bytearray(train), dtype=torch.uint8).long()], len(vocabulary), len(text)
