"""bench/gpu_merge.py's GPT-2 rows (bench/gpu_run.sh gpt2): the ratio, the fraction of the card's
fp32 peak, the faster PyTorch optimizer, and a side that failed, from made-up stage outputs.

    /usr/bin/python3 -m pytest tests/python/test_gpu_merge_gpt2.py -q
"""

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# GPT-2 124M, B 8 x T 1024: tokens x (6 N + 12 L T d), N = 12 L d^2 + V d (the documented formula).
L, D, V, T, TOKENS = 12, 768, 50257, 1024, 8 * 1024
FULL = TOKENS * (6 * (12 * L * D * D + V * D) + 12 * L * T * D)


def write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def merge(tmp_path, webgpu, torch, fma=(), gpu_name="NVIDIA H100 80GB HBM3", extra=()):
    out = subprocess.run(
        [
            sys.executable,
            str(REPO / "bench" / "gpu_merge.py"),
            "--webgpu",
            write(tmp_path / "w.jsonl", webgpu),
            "--torch",
            write(tmp_path / "t.jsonl", torch),
            "--fma",
            write(tmp_path / "f.jsonl", list(fma)),
            "--gpu-name",
            gpu_name,
            *extra,
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return {(o["model"], o["variant"]): o for o in map(json.loads, out.splitlines()) if o["kind"] == "gpt2"}


def wg(variant, ms, **kw):
    return {
        "kind": "gpt2_step",
        "model": "gpt2",
        "variant": variant,
        "batch": 8,
        "seq": 1024,
        "ms_per_step": ms,
        "tokens_per_s": round(TOKENS / ms * 1e3),
        "flops_per_step": FULL,
        "tflops": round(FULL / (ms * 1e9), 2),
        "loss_first": 10.9,
        **kw,
    }


def pt(variant, optimizer, ms):
    return {
        "kind": "torch_gpt2_step",
        "model": "gpt2",
        "variant": variant,
        "optimizer": optimizer,
        "batch": 8,
        "seq": 1024,
        "ms_per_step": ms,
        "tokens_per_s": round(TOKENS / ms * 1e3),
        "flops_per_step": FULL,
        "tflops": round(FULL / (ms * 1e9), 2),
    }


def test_ratio_and_fraction_of_peak(tmp_path):
    rows = merge(
        tmp_path,
        [wg("full", 200.0), {"kind": "summary"}],
        [pt("full", "python_ref", 300.0), pt("full", "fused", 250.0)],
        fma=[{"kind": "fma_peak", "gflops": 50000}],
    )
    o = rows[("gpt2", "full")]
    assert o["pytorch_optimizer"] == "fused" and o["pytorch_ms_per_step"] == 250.0
    assert o["pytorch_python_ref_ms"] == 300.0
    assert o["ratio"] == 1.25  # PyTorch 250 ms / WebGPU 200 ms: WebGPU faster
    assert o["peak_fp32_tflops"] == 67.0
    assert abs(o["webgpu_fraction_of_peak"] - FULL / 0.2 / 67e12) < 1e-4
    assert abs(o["pytorch_fraction_of_peak"] - FULL / 0.25 / 67e12) < 1e-4
    assert o["webgpu_fma_tflops"] == 50.0
    assert abs(o["webgpu_fraction_of_fma"] - round(FULL / (200 * 1e9), 2) / 50) < 1e-4
    assert o["tokens_per_step"] == TOKENS and o["flops_per_step"] == FULL


def test_peak_per_card(tmp_path):
    w, t = [wg("full", 200.0)], [pt("full", "fused", 250.0)]
    assert merge(tmp_path, w, t, gpu_name="NVIDIA H200")[("gpt2", "full")]["peak_fp32_tflops"] == 67.0
    assert merge(tmp_path, w, t, gpu_name="NVIDIA H100 PCIe")[("gpt2", "full")]["peak_fp32_tflops"] == 51.0
    # A card without a datasheet figure here: no fraction, unless --peak-tflops gives the peak.
    o = merge(tmp_path, w, t, gpu_name="Some GPU")[("gpt2", "full")]
    assert o["peak_fp32_tflops"] is None and o["webgpu_fraction_of_peak"] is None and o["ratio"] == 1.25
    o = merge(tmp_path, w, t, gpu_name="Some GPU", extra=["--peak-tflops", "100"])[("gpt2", "full")]
    assert abs(o["webgpu_fraction_of_peak"] - FULL / 0.2 / 100e12) < 1e-4


def test_a_side_that_failed_is_reported_not_dropped(tmp_path):
    rows = merge(
        tmp_path,
        [wg("full", 200.0), {"kind": "gpt2_step", "model": "gpt2", "variant": "lora", "error": "out of memory"}],
        [
            pt("full", "fused", 250.0),
            {"kind": "torch_gpt2_step", "model": "gpt2", "variant": "lora", "error": "exit status 124"},
        ],
    )
    lo = rows[("gpt2", "lora")]
    assert lo["webgpu_error"] == "out of memory" and lo["pytorch_error"] == "exit status 124"
    assert "ratio" not in lo and "webgpu_ms_per_step" not in lo
    assert rows[("gpt2", "full")]["ratio"] == 1.25
