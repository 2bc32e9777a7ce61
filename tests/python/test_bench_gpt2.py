"""`ptl bench` on shapes other than the presets' (issue 27's GPT-2 124M benchmarks): shape and
GELU overrides, rows shorter than the context (--seq), LoRA on the frozen base (--lora-rank) and
KV-cache generation (--generate), checked against python_ref's parameter counts and the closed
form of the matrix-product FLOPs; bad input refused before anything is measured; and
bench/cpu_vs_pytorch's LoRA and generation rows, where both sides must train the same adapters.

    /usr/bin/python3 -m pytest tests/python/test_bench_gpt2.py -q

Environment: PTL_BUILD_DIR (default <repo>/build).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
from ptl_cli import PTL  # noqa: E402

from python_ref.lora import apply_lora  # noqa: E402
from python_ref.model import GPTConfig, TinyGPT, param_count  # noqa: E402

# A small model of a shape no preset has: vocabulary 1000, ctx 128, trained on rows of 16 tokens.
V, L, D, H, CTX, B, T = 1000, 2, 48, 3, 128, 3, 16
SHAPE = ["--presets", "tiny", "--layers", L, "--d-model", D, "--heads", H, "--ctx", CTX, "--vocab", V, "--gelu", "tanh"]
COMMON = ["--threads", 1, "--json", "--peak-gflops", 100]


def bench(*args):
    r = subprocess.run([str(PTL), "bench", *map(str, args)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    assert len(lines) == 1, r.stdout
    return json.loads(lines[0])


def error(*args):
    r = subprocess.run([str(PTL), "bench", *map(str, args)], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0, r.stdout
    assert r.stdout == "", "nothing measured before the error"
    return r.stderr


def train_flops(lora_rank=0):
    """The matrix-product FLOPs of one step (cli/bench.cpp's count) in closed form."""
    tok = B * T
    attention = L * 12 * B * D * T * (T + 1) / 2  # q k^T and p v: 4 per pair forward, 8 backward
    if not lora_rank:  # every linear: forward 2, backward dx 2 + dW 2; the tied head the same
        return L * 6 * 12 * D * D * tok + attention + 6 * tok * V * D
    # Frozen base: dx only (forward 2 + 2); adapters (A [r, in], B [out, r]) forward, dx and dW
    # (6 per multiply-add) on qkv ([3d, d]), o ([d, d]), fc_in ([4d, d]) and fc_out ([d, 4d]).
    # Nothing trains below the first layer's q, k and v: their input gradient (the base's and the
    # qkv adapter's A) is never computed.
    r = lora_rank
    adapters = L * 6 * tok * r * ((D + 3 * D) + (D + D) + (D + 4 * D) + (4 * D + D))
    first_qkv_dx = 2 * tok * 3 * D * D + 2 * tok * r * D
    return L * 4 * 12 * D * D * tok + attention + 4 * tok * V * D + adapters - first_qkv_dx


def test_shape_overrides_and_short_rows_train_the_model_asked_for():
    j = bench(*SHAPE, "--batch", B, "--seq", T, "--steps", 2, "--warmup", 1, *COMMON)
    cfg = GPTConfig(vocab_size=V, n_layers=L, d_model=D, n_heads=H, ctx=CTX, gelu="tanh")
    assert j["params"] == param_count(cfg) == TinyGPT(cfg).num_params()
    assert (j["layers"], j["d_model"], j["heads"], j["ctx"], j["vocab"], j["gelu"]) == (L, D, H, CTX, V, "tanh")
    assert (j["batch"], j["seq"], j["tokens_per_step"], j["lora_rank"]) == (B, T, B * T, 0)
    # The program ran rows of T tokens, not of the context's 128.
    assert j["gflop_per_step"] == pytest.approx(train_flops() / 1e9, rel=1e-9)
    assert j["ms_per_step"] > 0
    assert j["grads_mib"] == pytest.approx(j["weights_mib"]) and j["moments_mib"] == pytest.approx(2 * j["weights_mib"])


def test_lora_trains_the_adapters_only():
    rank, targets = 4, "qkv,o,fc_in,fc_out"
    j = bench(*SHAPE, "--batch", B, "--seq", T, "--lora-rank", rank, "--lora-targets", targets, "--steps", 2, *COMMON)
    model = TinyGPT(GPTConfig(vocab_size=V, n_layers=L, d_model=D, n_heads=H, ctx=CTX, gelu="tanh"))
    trainable = sum(p.numel() for p in apply_lora(model, rank, 8.0, targets.split(",")))
    assert (j["lora_rank"], j["lora_targets"], j["trainable_params"]) == (rank, targets, trainable)
    assert j["gflop_per_step"] == pytest.approx(train_flops(rank) / 1e9, rel=1e-9)
    # AdamW moments for the adapters alone: 2 floats per trainable parameter.
    assert j["moments_mib"] == pytest.approx(2 * 4 * trainable / 2**20)
    # The trainer's own step (rows of the whole context) takes LoRA too.
    whole = bench(
        *SHAPE, "--batch", 1, "--lora-rank", rank, "--lora-targets", targets, "--steps", 1, "--warmup", 0, *COMMON
    )
    assert (whole["seq"], whole["trainable_params"]) == (CTX, trainable)


def test_generate_times_tokens_after_the_prompt():
    j = bench(*SHAPE, "--generate", 12, "--prompt", 20, "--warmup", 2, *COMMON)
    assert (j["mode"], j["prompt_tokens"], j["new_tokens"], j["params"]) == ("generate", 20, 12, j["params"])
    assert j["prefill_ms"] > 0 and j["ms_per_token"] > 0
    # tokens/s is the whole count over the whole time, so it is at most 1 / the fastest token
    # and at least 1 / the slowest: near 1000 / the median.
    assert 0.2 < j["tokens_per_s"] * j["ms_per_token"] / 1000 < 5
    with_adapters = bench(*SHAPE, "--generate", 4, "--prompt", 4, "--lora-rank", 2, *COMMON)
    assert with_adapters["lora_rank"] == 2 and with_adapters["new_tokens"] == 4


def test_bad_shapes_and_options_fail_before_measuring():
    assert "--seq 200 exceeds the context of 128" in error(*SHAPE, "--seq", 200, *COMMON)
    assert "plus --generate 120 tokens must fit the context of 128" in error(
        *SHAPE, "--generate", 120, "--prompt", 20, *COMMON
    )
    assert "rank" in error(*SHAPE, "--lora-rank", 100, *COMMON)
    assert "unknown LoRA target 'nope'" in error(*SHAPE, "--lora-rank", 2, "--lora-targets", "q,nope", *COMMON)
    assert "--gelu" in error(*SHAPE[:-2], "--gelu", "relu", *COMMON)
    assert "not divisible by n_heads 5" in error(*SHAPE, "--heads", 5, *COMMON)


def driver(*args):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    r = subprocess.run(
        [sys.executable, str(REPO / "bench" / "cpu_vs_pytorch"), "--ptl", str(PTL), "--presets", "tiny"]
        + ["--threads", "1", "--rounds", "1", "--steps", "1", "--warmup", "1", "--peak-gflops", "100"]
        + list(map(str, args)),
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_cpu_vs_pytorch_lora_and_generate_rows():
    pytest.importorskip("torch")
    lora = driver("--lora-rank", 4, "--lora-targets", "qkv,o,fc_in,fc_out")
    assert lora["mode"] == "lora" and lora["ptl_trainable_params"] == lora["pytorch_trainable_params"] > 0
    assert lora["params"] == lora["pytorch_params"] == 70464
    assert lora["speedup"] == pytest.approx(lora["pytorch_ms_per_step"] / lora["ptl_ms_per_step"], rel=1e-2)
    gen = driver("--generate", 10, "--prompt", 8)
    assert (gen["mode"], gen["new_tokens"], gen["prompt_tokens"]) == ("generate", 10, 8)
    assert gen["speedup"] == pytest.approx(gen["ptl_tokens_per_s"] / gen["pytorch_tokens_per_s"], rel=1e-2)
