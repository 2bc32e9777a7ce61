"""Dropout as docs/model.md ("Dropout") defines it: a counter-based mask every backend draws alike.

Element i of a site's tensor (its flat row-major index) is kept iff
    (h(base ^ h(i)) >> 8) >= threshold,   base = h(h(h(stream) ^ step) ^ key),
with h the u32 hash below, stream = FNV-1a 32 of the site's name, {key, step} the train step's
"dropout.seed" (key = u32(seed) ^ u32(seed >> 32), step = the 1-based optimizer step) and
threshold = floor(p 2^24 + 0.5). Kept values are multiplied by float32(1 / (1 - p)).

The hash runs vectorised on int64 tensors holding u32 values: a product of two u32 overflows
int64, but torch wraps it (two's complement), so its low 32 bits, kept by & 0xFFFFFFFF, are
the u32 product's.
"""

import torch

MASK32 = 0xFFFFFFFF


def hash_u32(x):
    """The spec's h(x) on a Python int or an int64 tensor of u32 values."""
    x = x ^ (x >> 16)
    x = (x * 0x7FEB352D) & MASK32
    x = x ^ (x >> 15)
    x = (x * 0x846CA68B) & MASK32
    return x ^ (x >> 16)


def stream_of(name):
    """FNV-1a 32 of the site's name (UTF-8 bytes)."""
    h = 2166136261
    for b in name.encode():
        h = ((h ^ b) * 16777619) & MASK32
    return h


def key_of(seed):
    """The run's dropout key from its u64 seed: both halves count."""
    seed &= (1 << 64) - 1
    return (seed & MASK32) ^ (seed >> 32)


def base_of(stream, key, step):
    return hash_u32(hash_u32(hash_u32(stream) ^ (step & MASK32)) ^ key)


def threshold_of(p):
    import math

    return int(math.floor(p * 16777216.0 + 0.5))


def scale_of(p):
    return torch.tensor(1.0 / (1.0 - p), dtype=torch.float32)


def keep_mask(name, key, step, p, shape, device=None):
    """Bool tensor of `shape`: which elements site `name` keeps at (key, step) with rate p."""
    n = 1
    for s in shape:
        n *= s
    base = base_of(stream_of(name), key, step)
    index = torch.arange(n, dtype=torch.int64, device=device) & MASK32
    r = hash_u32(base ^ hash_u32(index))
    return ((r >> 8) >= threshold_of(p)).view(shape)


class DropoutContext:
    """The (key, step) of the train step being run, shared by a model's dropout sites; None
    outside a training step (then no site drops anything)."""

    def __init__(self):
        self.seed = None


def drop(x, p, name, ctx, training):
    """x with site `name`'s mask applied (kept * scale, else 0), or x itself when off."""
    if p <= 0 or not training or ctx is None or ctx.seed is None:
        return x
    key, step = ctx.seed
    keep = keep_mask(name, key, step, p, tuple(x.shape), x.device)
    return torch.where(keep, x * scale_of(p).to(x.device), torch.zeros((), dtype=x.dtype, device=x.device))
