"""Dropout (docs/model.md, "Dropout"): the engine's training with dropout against python_ref's.

The masks are a counter-based hash of (seed, step, site, element), so PyTorch draws exactly the
engine's: with the same weights, batches and (key, step), losses and gradients agree to rounding.
`ptl_parity_dump --dropout P` (the model's sites) and `ptl_lora_dump --dropout P` (the adapters'
input) write the runs; the generator itself is checked on its own (known answers shared with
tests/test_dropout.cpp, rate, independence across steps and sites, equal masks for equal seeds).

    /usr/bin/python3 -m pytest tests/python/test_dropout_parity.py -q -s

Environment: PTL_BUILD_DIR (default <repo>/build), PTL_DATA_DIR (default <repo>/../shared/data).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from python_ref import optim as opt  # noqa: E402
from python_ref.checkpoint import load_checkpoint, split_state  # noqa: E402
from python_ref.dropout import base_of, hash_u32, keep_mask, key_of, stream_of, threshold_of  # noqa: E402
from python_ref.lora import load_adapter, lora_parameters, lora_state_dict  # noqa: E402
from python_ref.model import GPTConfig, TinyGPT  # noqa: E402

BUILD = Path(os.environ.get("PTL_BUILD_DIR", REPO / "build"))
STEPS = 12
SEED = 0x1234_5678_9ABC  # above 2^32: both halves of the seed make the key
P = 0.15

LOSS_REL = 1e-4  # every step
GRAD_REL = 1e-4  # per tensor: max |g_cpp - g_torch| / max |g_torch|
GRAD_NORM_REL = 1e-4
WEIGHT_ABS = 1e-4


def data_file():
    if os.environ.get("PTL_DATA_DIR"):
        return Path(os.environ["PTL_DATA_DIR"]) / "tinyshakespeare.txt"
    return REPO.parent / "shared" / "data" / "tinyshakespeare.txt"


def run_dump(binary, out, extra):
    exe = BUILD / "tests" / binary
    if not exe.exists():
        pytest.skip(f"{exe} not built (build the project, or set PTL_BUILD_DIR)")
    data = data_file()
    if not data.exists():
        pytest.skip(f"training data missing: {data} (set PTL_DATA_DIR)")
    cmd = [str(exe), "--preset", "tiny", "--steps", str(STEPS), "--data", str(data), "--out", str(out)]
    cmd += ["--seed", str(SEED), "--dropout", str(P)] + extra
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"{' '.join(cmd)} failed:\n{proc.stdout}\n{proc.stderr}"
    with open(out / "dump.json") as f:
        return json.load(f)


def batch(info, step):
    B, T = info["batch"], info["ctx"]
    s = info["steps"][step]
    return (
        torch.tensor(s["inputs"], dtype=torch.long).view(B, T),
        torch.tensor(s["targets"], dtype=torch.long).view(B, T),
    )


def rel_errors(cpp, model):
    errors = {}
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        scale = p.grad.abs().max().item()
        diff = (cpp[name] - p.grad).abs().max().item()
        # The key bias's gradient is exactly zero (softmax ignores a shift): only noise on both sides.
        if name.endswith("attn.k_proj.bias"):
            assert diff <= 1e-6 and scale <= 1e-6, name
            continue
        errors[name] = diff / scale if scale > 0 else diff
    return errors


# -- the generator ---------------------------------------------------------------------------------


def test_generator_known_answers():
    """The numbers tests/test_dropout.cpp checks in the engine (and the WGSL kernels must give)."""
    assert hash_u32(0) == 0 and hash_u32(1) == 0x688990C0 and hash_u32(0xDEADBEEF) == 0xE628C683
    assert stream_of("") == 2166136261 and stream_of("a") == 0xE40C292C and stream_of("emb.drop") == 0x6E0B30AA
    assert key_of(1337) == 1337 and key_of(0x123456789ABCDEF0) == 0x88888888
    assert base_of(stream_of("emb.drop"), 1337, 1) == 0x01A2D92F
    assert threshold_of(0.1) == 1677722 and threshold_of(0.2) == 3355443
    kept = keep_mask("emb.drop", 1337, 1, 0.1, (16,)).int().tolist()
    assert kept == [1, 1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 0, 0, 1, 1, 1]
    # The vectorised hash equals the scalar one (int64 products wrap; & 0xFFFFFFFF keeps the u32).
    xs = [0, 1, 2**31 - 1, 2**31, 2**32 - 1, 0xDEADBEEF, 123456789]
    assert hash_u32(torch.tensor(xs, dtype=torch.int64)).tolist() == [hash_u32(x) for x in xs]


def test_mask_rate_and_independence():
    n = (200_000,)
    for p in (0.1, 0.2, 0.5):
        rate = 1 - keep_mask("blocks.0.attn.drop", 42, 7, p, n).float().mean().item()
        assert abs(rate - p) < 0.006, (p, rate)  # 5 binomial standard deviations
    a = keep_mask("blocks.0.attn.drop", 42, 7, 0.2, n)

    def differ(b):
        return (a != b).float().mean().item()

    # Independent masks at rate 0.2 differ on 2 p (1 - p) = 32% of the elements.
    assert abs(differ(keep_mask("blocks.0.attn.drop", 42, 8, 0.2, n)) - 0.32) < 0.01  # next step
    assert abs(differ(keep_mask("blocks.1.attn.drop", 42, 7, 0.2, n)) - 0.32) < 0.01  # another site
    assert abs(differ(keep_mask("blocks.0.attn.drop", 43, 7, 0.2, n)) - 0.32) < 0.01  # another seed
    assert torch.equal(a, keep_mask("blocks.0.attn.drop", 42, 7, 0.2, n))  # same (seed, step)


def test_model_dropout_only_in_training_with_a_seed():
    torch.manual_seed(0)
    model = TinyGPT(GPTConfig(n_layers=2, d_model=24, n_heads=3, ctx=16), dropout=0.3)
    x = torch.randint(0, 256, (2, 16))
    model.eval()
    ref, _ = model(x)
    same, _ = model(x, dropout_seed=(5, 1))
    assert torch.equal(ref, same)  # eval mode: never
    model.train()
    assert torch.equal(model(x)[0], ref)  # no seed: off
    a, _ = model(x, dropout_seed=(5, 1))
    b, _ = model(x, dropout_seed=(5, 2))
    assert not torch.equal(a, ref) and not torch.equal(a, b)
    assert torch.equal(a, model(x, dropout_seed=(5, 1))[0])
    with pytest.raises(ValueError):
        TinyGPT(GPTConfig(), dropout=1.0)


# -- the engine against PyTorch --------------------------------------------------------------------


def test_training_with_dropout_matches_the_engine(tmp_path):
    """Step-0 gradients and STEPS AdamW steps with dropout P on every site of Tiny."""
    info = run_dump("ptl_parity_dump", tmp_path, [])
    tc = info["train_config"]
    assert tc["dropout"] == P
    key = key_of(SEED)
    model = TinyGPT.from_checkpoint(str(tmp_path / "init.tinygpt"), dropout=P)
    model.train()
    optimizer = opt.make_optimizer(
        model, lr=tc["lr"], betas=(tc["beta1"], tc["beta2"]), eps=tc["eps"], weight_decay=tc["weight_decay"]
    )
    loss_errs, norm_errs, undropped = [], [], []
    for i, s in enumerate(info["steps"]):
        x, y = batch(info, i)
        opt.set_lr(optimizer, s["lr"])
        _, loss = model(x, y, dropout_seed=(key, i + 1))
        with torch.no_grad():
            undropped.append(abs(model(x, y)[1].item() - s["loss"]) / s["loss"])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if i == 0:
            errors = rel_errors(load_checkpoint(str(tmp_path / "grads_step0.tinygpt"))[0], model)
            worst = max(errors, key=errors.get)
            print(f"[dropout parity] step-0 gradient max rel err {errors[worst]:.2e} ({worst})")
            assert errors[worst] <= GRAD_REL, {k: v for k, v in errors.items() if v > GRAD_REL}
        norm = opt.clip_gradients(model, tc["grad_clip"])
        optimizer.step()
        loss_errs.append(abs(s["loss"] - loss.item()) / loss.item())
        norm_errs.append(abs(s["grad_norm"] - norm) / norm)
    final = split_state(load_checkpoint(str(tmp_path / "final.tinygpt"))[0])[0]
    weight_err = max((final[k] - v).abs().max().item() for k, v in model.state_dict().items())
    print(
        f"[dropout parity] loss max rel {max(loss_errs):.2e}, grad norm {max(norm_errs):.2e}, weights {weight_err:.2e}"
    )
    assert max(loss_errs) <= LOSS_REL, loss_errs
    assert max(norm_errs) <= GRAD_NORM_REL, norm_errs
    assert weight_err <= WEIGHT_ABS
    # The test can fail: the same model without the masks is well off the engine's losses (at
    # initialisation every loss is near log 256, so the gap grows as the weights move).
    assert min(undropped) > 2 * LOSS_REL and max(undropped) > 10 * LOSS_REL, undropped


def test_lora_dropout_matches_the_engine(tmp_path):
    """LoRA with dropout P on the adapters' input (every projection): gradients, losses, adapters."""
    info = run_dump("ptl_lora_dump", tmp_path, ["--targets", "all", "--lr", "1e-2"])
    assert info["lora_config"]["dropout"] == P
    tc, lc = info["train_config"], info["lora_config"]
    key = key_of(SEED)
    model = TinyGPT.from_checkpoint(str(tmp_path / "base.tinygpt"))
    load_adapter(model, str(tmp_path / "adapter_init.tinygpt-lora"), base_path=str(tmp_path / "base.tinygpt"))
    assert model.blocks[0].attn.q_proj.lora_dropout == P  # read from the adapter's lora_config
    model.train()
    params = lora_parameters(model)
    optimizer = torch.optim.AdamW(
        params, lr=tc["lr"], betas=(tc["beta1"], tc["beta2"]), eps=tc["eps"], weight_decay=lc["weight_decay"]
    )
    loss_errs, norm_errs = [], []
    for i, s in enumerate(info["steps"]):
        x, y = batch(info, i)
        opt.set_lr(optimizer, s["lr"])
        _, loss = model(x, y, dropout_seed=(key, i + 1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        norm = opt.clip_gradients(model, tc["grad_clip"])
        for which, at in (("first", 0), ("last", len(info["steps"]) - 1)):
            if i == at:
                errors = rel_errors(load_checkpoint(str(tmp_path / f"grads_{which}.safetensors"))[0], model)
                worst = max(errors, key=errors.get)
                print(f"[lora dropout parity] {which}-step adapter gradient max rel err {errors[worst]:.2e} ({worst})")
                assert errors[worst] <= GRAD_REL
        optimizer.step()
        loss_errs.append(abs(s["loss"] - loss.item()) / loss.item())
        norm_errs.append(abs(s["grad_norm"] - norm) / norm)
    final, _ = load_checkpoint(str(tmp_path / "adapter_final.tinygpt-lora"))
    weight_err = max((final[k] - v).abs().max().item() for k, v in lora_state_dict(model).items())
    print(
        f"[lora dropout parity] loss max rel {max(loss_errs):.2e}, norm {max(norm_errs):.2e}, adapters {weight_err:.2e}"
    )
    assert max(loss_errs) <= LOSS_REL, loss_errs
    assert max(norm_errs) <= GRAD_NORM_REL, norm_errs
    assert weight_err <= WEIGHT_ABS
