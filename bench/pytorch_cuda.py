#!/usr/bin/env python3
"""The PyTorch CUDA peer of bench/webgpu_bench.mjs, on the same GPU: fp32 with TF32 off.

    python3 bench/pytorch_cuda.py [--presets tiny,...,behemoth] [--matmul preset,4096|none]
                                  [--layouts fwd,dx,dW] [--steps 20] [--warmup 5] [--train 1|0]

Prints one JSON line per measurement:
  {"kind":"torch_matmul","layout","shape","M","N","K","ms","gflops"}   cuBLAS through torch.matmul
      fwd: x @ W^T (F.linear), dx: dy @ W, dW: dy^T @ x   (the shapes and labels of webgpu_bench.mjs)
  {"kind":"torch_train","preset","batch","variant","ms_per_step","tokens_per_s","loss_first","loss_last"}
      python_ref.model.TinyGPT on CUDA, forward + backward + clipping + AdamW, eager:
      variant "python_ref": python_ref.optim as it is (AdamW foreach=False, clip_gradients reads
      the norm back to the host every step); variant "fused": the same model with
      torch.optim.AdamW(fused=True) and clip_grad_norm_ without a host read.
Timing: matmul: CUDA events around `reps` back-to-back products (at least ~0.3 s) after warm-up;
training: wall time of `steps` back-to-back steps between two torch.cuda.synchronize().
"""

import argparse
import json
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from python_ref import optim as opt  # noqa: E402
from python_ref.model import PRESETS, TinyGPT, preset_config  # noqa: E402

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
torch.set_float32_matmul_precision("highest")


def emit(o):
    print(json.dumps(o), flush=True)


def bench_matmul(label, M, N, K, layout, dev):
    g = torch.Generator(device=dev).manual_seed(M * 31 + N * 7 + K)
    x = torch.rand(M, K, device=dev, generator=g) * 2 - 1
    W = torch.rand(N, K, device=dev, generator=g) * 2 - 1
    dy = torch.rand(M, N, device=dev, generator=g) * 2 - 1
    if layout == "fwd":
        f = lambda: F.linear(x, W)  # noqa: E731
    elif layout == "dx":
        f = lambda: dy @ W  # noqa: E731
    else:
        f = lambda: dy.t() @ x  # noqa: E731
    # correctness against float64 on a few rows
    out = f()
    if layout == "fwd":
        ref = x[:8].double() @ W.double().t()
    elif layout == "dx":
        ref = dy[:8].double() @ W.double()
    else:
        ref = dy.t()[:8].double() @ x.double()
    err = ((out[:8].double() - ref).abs().max() / ref.abs().max()).item()
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < 0.3:
        f()
        torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    f()
    e.record()
    torch.cuda.synchronize()
    est = max(s.elapsed_time(e), 1e-3)
    n = min(5000, max(20, int(300 / est)))
    s.record()
    for _ in range(n):
        f()
    e.record()
    torch.cuda.synchronize()
    ms = s.elapsed_time(e) / n
    emit(
        {
            "kind": "torch_matmul",
            "layout": layout,
            "shape": label,
            "M": M,
            "N": N,
            "K": K,
            "ms": round(ms, 4),
            "gflops": float(f"{2 * M * N * K / (ms * 1e6):.4g}"),
            "rel_err": err,
        }
    )


def bench_train(preset, variant, steps, warmup, dev):
    cfg, batch = preset_config(preset)
    torch.manual_seed(0)
    model = TinyGPT(cfg).to(dev)
    model.train()
    if variant == "python_ref":
        optimizer = opt.make_optimizer(model, lr=3e-4)
        clip = lambda: opt.clip_gradients(model)  # noqa: E731
    else:
        optimizer = torch.optim.AdamW(opt.param_groups(model), lr=3e-4, betas=opt.BETAS, eps=opt.EPS, fused=True)
        clip = lambda: torch.nn.utils.clip_grad_norm_(model.parameters(), opt.GRAD_CLIP, foreach=True)  # noqa: E731
    g = torch.Generator(device=dev).manual_seed(42)
    xb = torch.randint(0, 256, (batch, cfg.ctx), generator=g, device=dev)
    yb = torch.randint(0, 256, (batch, cfg.ctx), generator=g, device=dev)

    def step():
        _, loss = model(xb, yb)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        clip()
        optimizer.step()
        return loss

    first = step().item()
    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < 0.5:  # clocks up, caches warm
        step()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(steps):
        loss = step()
    torch.cuda.synchronize()
    ms = (time.perf_counter() - t0) * 1e3 / steps
    tokens = batch * cfg.ctx
    emit(
        {
            "kind": "torch_train",
            "preset": preset,
            "batch": batch,
            "variant": variant,
            "ms_per_step": round(ms, 3),
            "tokens_per_s": round(tokens / ms * 1e3),
            "loss_first": first,
            "loss_last": loss.item(),
            "max_memory_mib": round(torch.cuda.max_memory_allocated() / 2**20),
        }
    )


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--presets", default="tiny,small,medium,large,xl,huge,massive,mega,behemoth")
    ap.add_argument("--matmul", default="preset,4096")
    ap.add_argument("--layouts", default="fwd,dx,dW")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--train", default="1")
    ap.add_argument("--variants", default="python_ref,fused")
    a = ap.parse_args()
    presets = [p for p in a.presets.split(",") if p]
    layouts = [x for x in a.layouts.split(",") if x]
    # Every name checked before the GPU is touched (an unknown one used to run under its name).
    for name, given, allowed in (
        ("--presets", presets, list(PRESETS)),
        ("--layouts", layouts, ["fwd", "dx", "dW"]),
        ("--variants", [v for v in a.variants.split(",") if v], ["python_ref", "fused"]),
    ):
        bad = [x for x in given if x not in allowed]
        if bad:
            ap.error(f"{name}: unknown {', '.join(bad)} (choose from {', '.join(allowed)})")
    if not torch.cuda.is_available():
        raise SystemExit("bench/pytorch_cuda.py: no CUDA device (this benchmark runs on the GPU machine)")
    dev = torch.device("cuda")
    emit(
        {
            "kind": "torch_env",
            "torch": torch.__version__,
            "cuda": torch.version.cuda,
            "device": torch.cuda.get_device_name(0),
            "allow_tf32": torch.backends.cuda.matmul.allow_tf32,
            "float32_matmul_precision": torch.get_float32_matmul_precision(),
        }
    )
    modes = a.matmul.split(",")
    if "preset" in modes:
        for p in presets:
            c = PRESETS[p]
            M, d = c["batch"] * c["ctx"], c["d_model"]
            for l in layouts:
                for label, N, K in (
                    (f"{p} qkv/o", d, d),
                    (f"{p} fc_in", 4 * d, d),
                    (f"{p} fc_out", d, 4 * d),
                    (f"{p} lm_head", 256, d),
                ):
                    bench_matmul(label, M, N, K, l, dev)
    if "4096" in modes:
        for l in layouts:
            bench_matmul("4096^3", 4096, 4096, 4096, l, dev)
    if a.train != "0":
        for p in presets:
            for v in a.variants.split(","):
                bench_train(p, v, a.steps, a.warmup, dev)
                # The model and its optimizer went with bench_train's frame: give their memory back
                # so that the next preset's peak is its own.
                torch.cuda.empty_cache()
                torch.cuda.reset_peak_memory_stats()


if __name__ == "__main__":
    main()
