#!/usr/bin/env python3
"""The PyTorch CUDA peer of bench/webgpu_bench.mjs, on the same GPU: fp32 with TF32 off.

    python3 bench/pytorch_cuda.py [--presets tiny,...,behemoth] [--matmul preset,4096|none]
                                  [--layouts fwd,dx,dW] [--steps 20] [--warmup 5] [--train 1|0]
                                  [--gpt2 gpt2,gpt2-medium,gpt2-test] [--gpt2-variants full,lora]
                                  [--gpt2-batch 8] [--lora-rank 16] [--lora-alpha 32] [--device cuda|cpu]

Prints one JSON line per measurement:
  {"kind":"torch_matmul","layout","shape","M","N","K","ms","gflops"}   cuBLAS through torch.matmul
      fwd: x @ W^T (F.linear), dx: dy @ W, dW: dy^T @ x   (the shapes and labels of webgpu_bench.mjs)
  {"kind":"torch_train","preset","batch","variant","ms_per_step","tokens_per_s","loss_first","loss_last"}
      python_ref.model.TinyGPT on CUDA, forward + backward + clipping + AdamW, eager:
      variant "python_ref": python_ref.optim as it is (AdamW foreach=False, clip_gradients reads
      the norm back to the host every step); variant "fused": the same model with
      torch.optim.AdamW(fused=True) and clip_grad_norm_ without a host read.
  {"kind":"torch_gpt2_step","model","variant":"full|lora","optimizer","batch","seq","ms_per_step","tokens_per_s",
   "flops_per_step","tflops","params","trainable_params","loss_first","loss_last","max_memory_mib"}   (--gpt2)
      the GPT-2 shapes of bench/webgpu_bench.mjs --gpt2 (gpt2: 12 layers, d 768, 12 heads; gpt2-medium: 24
      layers, d 1024, 16 heads; ctx 1024, vocab 50,257, tanh GELU, tied head; gpt2-test: 2 layers, d 64, 4
      heads, ctx 32, batch 1) as python_ref's TinyGPT, random weights (its own initialisation) and tokens:
      full trains every parameter, lora applies python_ref.lora.apply_lora (rank --lora-rank, alpha
      --lora-alpha, targets qkv, o, fc_in, fc_out; the base frozen) and trains the adapters (AdamW, weight
      decay 0, as the engine's adapters). optimizer: "python_ref" (AdamW foreach=False, the norm read back
      every step) or "fused" (AdamW(fused=True), clip_grad_norm_ without a host read; CUDA only).
      flops_per_step: webgpu_bench.mjs's formula (gpt2_flops below). With --gpt2 the matmuls and the
      presets' steps run only when --matmul / --train ask for them. --device cpu (GPT-2 steps only, the
      python_ref optimizer): a smoke test where there is no GPU.
Timing: matmul: CUDA events around `reps` back-to-back products (at least ~0.3 s) after warm-up;
training: wall time of `steps` back-to-back steps between two torch.cuda.synchronize().
"""

import argparse
import contextlib
import json
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from python_ref import optim as opt  # noqa: E402
from python_ref.lora import apply_lora  # noqa: E402
from python_ref.model import PRESETS, GPTConfig, TinyGPT, preset_config  # noqa: E402

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


def sync(dev):
    if dev.type == "cuda":
        torch.cuda.synchronize()


# GPT-2's shapes (bench/webgpu_bench.mjs's GPT2): layers, d, heads, ctx, vocab, batch.
GPT2 = {
    "gpt2": dict(n_layers=12, d_model=768, n_heads=12, ctx=1024, vocab_size=50257, batch=8),
    "gpt2-medium": dict(n_layers=24, d_model=1024, n_heads=16, ctx=1024, vocab_size=50257, batch=8),
    "gpt2-test": dict(n_layers=2, d_model=64, n_heads=4, ctx=32, vocab_size=50257, batch=1),
}
LORA_TARGETS = ("qkv", "o", "fc_in", "fc_out")


def time_training(model, optimizer, clip, vocab, batch, seq, steps, warmup, dev):
    """Training steps on one random batch: the first step's loss, then `warmup` steps and at least
    0.5 s more untimed (clocks up, caches warm), then `steps` timed back to back between two device
    synchronisations. Returns (first loss, last loss, ms per step)."""
    g = torch.Generator(device=dev).manual_seed(42)
    xb = torch.randint(0, vocab, (batch, seq), generator=g, device=dev)
    yb = torch.randint(0, vocab, (batch, seq), generator=g, device=dev)

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
    sync(dev)
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < 0.5:
        step()
    sync(dev)
    t0 = time.perf_counter()
    for _ in range(steps):
        loss = step()
    sync(dev)
    return first, loss.item(), (time.perf_counter() - t0) * 1e3 / steps


def gpt2_flops(cfg, tokens, variant, rank):
    """Floating-point operations of one step: tokens x (full: 6 N + 12 L T d; lora: 4 N + 12 L T d
    + 6 r L 16 d), N = 12 L d^2 + V d (the matrix products' weights, the tied head included), 12 L T d
    attention's two products forward and backward over the whole T x T, 4 N the frozen weights'
    forward and input gradient, 6 r L 16 d the adapters' products (in + out summed over the four
    targets: 4d + 2d + 5d + 5d)."""
    L, d, V, T = cfg.n_layers, cfg.d_model, cfg.vocab_size, cfg.ctx
    N = 12 * L * d * d + V * d
    attn = 12 * L * T * d
    per_token = 6 * N + attn if variant == "full" else 4 * N + attn + 6 * rank * L * 16 * d
    return per_token * tokens


def bench_gpt2(name, variant, optimizer_kind, batch, rank, alpha, steps, warmup, dev):
    g2 = dict(GPT2[name])
    default_batch = g2.pop("batch")
    batch = batch or default_batch
    cfg = GPTConfig(gelu="tanh", **g2)
    torch.manual_seed(0)
    # torch 2: the model and its adapters initialised on the device itself (355M: seconds on a CPU);
    # torch 1 builds on the CPU and moves the whole model, adapters included, before the optimizer.
    on_device = hasattr(torch.device, "__enter__")
    with torch.device(dev) if on_device else contextlib.nullcontext():
        model = TinyGPT(cfg)
        params = apply_lora(model, rank=rank, alpha=alpha, targets=LORA_TARGETS) if variant == "lora" else None
    if not on_device:
        model.to(dev)
        params = params and [p for p in model.parameters() if p.requires_grad]
    model.train()
    if variant == "lora":
        groups = [{"params": params, "weight_decay": 0.0}]
    else:
        params = list(model.parameters())
        groups = opt.param_groups(model)
    if optimizer_kind == "python_ref":
        optimizer = torch.optim.AdamW(groups, lr=3e-4, betas=opt.BETAS, eps=opt.EPS, foreach=False)
        clip = lambda: float(torch.nn.utils.clip_grad_norm_(params, opt.GRAD_CLIP))  # noqa: E731
    else:
        optimizer = torch.optim.AdamW(groups, lr=3e-4, betas=opt.BETAS, eps=opt.EPS, fused=True)
        clip = lambda: torch.nn.utils.clip_grad_norm_(params, opt.GRAD_CLIP, foreach=True)  # noqa: E731
    first, last, ms = time_training(model, optimizer, clip, cfg.vocab_size, batch, cfg.ctx, steps, warmup, dev)
    tokens = batch * cfg.ctx
    flops = gpt2_flops(cfg, tokens, variant, rank)
    o = {
        "kind": "torch_gpt2_step",
        "model": name,
        "variant": variant,
        "optimizer": optimizer_kind,
        "batch": batch,
        "seq": cfg.ctx,
    }
    if variant == "lora":
        o.update({"lora_rank": rank, "lora_alpha": alpha})
    o.update(
        {
            "params": sum(p.numel() for p in model.parameters()),
            "trainable_params": sum(p.numel() for p in params),
            "ms_per_step": round(ms, 3),
            "tokens_per_s": round(tokens / ms * 1e3),
            "flops_per_step": flops,
            "tflops": round(flops / (ms * 1e9), 2),
            "steps": steps,
            "loss_first": first,
            "loss_last": last,
        }
    )
    if dev.type == "cuda":
        o["max_memory_mib"] = round(torch.cuda.max_memory_allocated() / 2**20)
    emit(o)


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
    first, last, ms = time_training(model, optimizer, clip, 256, batch, cfg.ctx, steps, warmup, dev)
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
            "loss_last": last,
            "max_memory_mib": round(torch.cuda.max_memory_allocated() / 2**20),
        }
    )


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--presets", default="tiny,small,medium,large,xl,huge,massive,mega,behemoth")
    ap.add_argument("--matmul", default=None, help="default preset,4096 (none with --gpt2)")
    ap.add_argument("--layouts", default="fwd,dx,dW")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--train", default=None, help="default 1 (0 with --gpt2)")
    ap.add_argument("--variants", default="python_ref,fused")
    ap.add_argument("--gpt2", default="")
    ap.add_argument("--gpt2-variants", default="full,lora")
    ap.add_argument("--gpt2-batch", type=int, default=0, help="default: the model's (8; gpt2-test 1)")
    ap.add_argument("--lora-rank", type=int, default=16)
    ap.add_argument("--lora-alpha", type=float, default=32.0)
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    a = ap.parse_args()
    gpt2 = [m for m in a.gpt2.split(",") if m]
    if a.matmul is None:
        a.matmul = "none" if gpt2 else "preset,4096"
    if a.train is None:
        a.train = "0" if gpt2 else "1"
    presets = [p for p in a.presets.split(",") if p]
    layouts = [x for x in a.layouts.split(",") if x]
    variants = [v for v in a.variants.split(",") if v]
    gpt2_variants = [v for v in a.gpt2_variants.split(",") if v]
    # Every name checked before the GPU is touched (an unknown one used to run under its name).
    for name, given, allowed in (
        ("--presets", presets, list(PRESETS)),
        ("--layouts", layouts, ["fwd", "dx", "dW"]),
        ("--variants", variants, ["python_ref", "fused"]),
        ("--gpt2", gpt2, list(GPT2)),
        ("--gpt2-variants", gpt2_variants, ["full", "lora"]),
    ):
        bad = [x for x in given if x not in allowed]
        if bad:
            ap.error(f"{name}: unknown {', '.join(bad)} (choose from {', '.join(allowed)})")
    if a.device == "cpu":
        if a.matmul != "none" or a.train != "0":
            ap.error("--device cpu runs the GPT-2 steps only (give --gpt2; the matmuls and presets time CUDA)")
        if "fused" in variants:
            variants = ["python_ref"]  # AdamW(fused=True) is CUDA's
        dev = torch.device("cpu")
    else:
        if not torch.cuda.is_available():
            raise SystemExit("bench/pytorch_cuda.py: no CUDA device (this benchmark runs on the GPU machine)")
        dev = torch.device("cuda")
    emit(
        {
            "kind": "torch_env",
            "torch": torch.__version__,
            "cuda": torch.version.cuda,
            "device": torch.cuda.get_device_name(0) if dev.type == "cuda" else "cpu",
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
    for m in gpt2:
        for v in gpt2_variants:
            for o in variants:
                try:
                    bench_gpt2(m, v, o, a.gpt2_batch, a.lora_rank, a.lora_alpha, a.steps, a.warmup, dev)
                except torch.cuda.OutOfMemoryError as e:
                    emit({"kind": "torch_gpt2_step", "model": m, "variant": v, "optimizer": o, "error": str(e)[:500]})
                if dev.type == "cuda":
                    torch.cuda.empty_cache()
                    torch.cuda.reset_peak_memory_stats()


if __name__ == "__main__":
    main()
