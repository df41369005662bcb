"""The model the GPU benchmark trains on both engines, described once for the PyTorch side
(torch_mlp_bench.py) and the summary (summarize.py): layer widths, batch, and the FLOPs of one
update. run.sh's speed stage and cuda_products.cpp use the same sizes."""

SIZES = [784, 4096, 4096, 4096, 10]
BATCH = 4096


def model_flops_per_update(batch):
    # forward 2·B·in·out per layer; backward dW 2·B·in·out per layer, dX for all but layer 1
    pairs = list(zip(SIZES[:-1], SIZES[1:]))
    forward = sum(2 * batch * i * o for i, o in pairs)
    backward = forward + sum(2 * batch * i * o for i, o in pairs[1:])
    return forward + backward
