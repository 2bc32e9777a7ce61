"""Parity of the engine with PyTorch at vocabularies other than the bytes' 256.

The engine's loss programs compute the tied output projection and the cross-entropy together,
over chunks of the vocabulary, and never hold the [B*T, V] logits (cross_entropy_tied); PyTorch
computes them the plain way, logits then F.cross_entropy. `ptl_parity_dump --vocab V` trains the
Tiny preset with V tokens on batches whose byte b becomes token b * 7919 mod V, so that inputs and
targets spread over the whole vocabulary. Here PyTorch recomputes the step-0 logits, loss and
gradients (the 50,257 rows of tok_emb.weight included) and the training steps' losses.

    /usr/bin/python3 -m pytest tests/python/test_vocab_parity.py -q -s
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from python_ref import optim as opt  # noqa: E402
from python_ref.checkpoint import load_checkpoint  # noqa: E402
from python_ref.model import TinyGPT  # noqa: E402

BUILD = Path(os.environ.get("PTL_BUILD_DIR", REPO / "build"))
BINARY = BUILD / "tests" / "ptl_parity_dump"
VOCABS = [101, 50257]  # a small odd vocabulary (below the bytes'), and GPT-2's
STEPS = 3
BATCH = 2

# The tolerances of test_parity.py (fp32 on both sides, sums in different orders).
LOSS_REL = 1e-5
LOGITS_ABS = 1e-4
GRAD_REL = 1e-4
TRAIN_LOSS_REL = 1e-4


def data_file():
    if os.environ.get("PTL_DATA_DIR"):
        return Path(os.environ["PTL_DATA_DIR"]) / "tinyshakespeare.txt"
    return REPO.parent / "shared" / "data" / "tinyshakespeare.txt"


@pytest.fixture(scope="module", params=VOCABS)
def dump(request, tmp_path_factory):
    vocab = request.param
    if not BINARY.exists():
        pytest.skip(f"C++ parity binary not built: {BINARY} (build the project, or set PTL_BUILD_DIR)")
    data = data_file()
    if not data.exists():
        pytest.skip(f"training data missing: {data} (set PTL_DATA_DIR)")
    out = tmp_path_factory.mktemp(f"vocab_{vocab}")
    cmd = [str(BINARY), "--preset", "tiny", "--vocab", str(vocab), "--batch", str(BATCH), "--steps", str(STEPS)]
    cmd += ["--data", str(data), "--out", str(out), "--seed", "7"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    with open(out / "dump.json") as f:
        info = json.load(f)
    info["dir"] = out
    info["vocab"] = vocab
    return info


def batch(info, step):
    B, T = info["batch"], info["ctx"]
    s = info["steps"][step]
    return (
        torch.tensor(s["inputs"], dtype=torch.long).view(B, T),
        torch.tensor(s["targets"], dtype=torch.long).view(B, T),
    )


def rel(a, b):
    return abs(a - b) / max(abs(b), 1e-30)


def test_the_batches_cover_the_vocabulary(dump):
    ids = {t for s in dump["steps"] for t in s["inputs"] + s["targets"]}
    assert max(ids) < dump["vocab"]
    assert max(ids) >= dump["vocab"] // 2, "the targets should reach the upper half of the vocabulary"


def test_logits_loss_and_gradients_at_init(dump):
    V = dump["vocab"]
    model = TinyGPT.from_checkpoint(str(dump["dir"] / "init.tinygpt"))
    assert model.config.vocab_size == V
    x, y = batch(dump, 0)
    logits, loss = model(x, y)
    loss.backward()

    cpp_logits = np.fromfile(dump["dir"] / "logits_step0.bin", dtype="<f4")
    assert cpp_logits.size == x.numel() * V
    logits_err = (torch.from_numpy(cpp_logits).view_as(logits) - logits.detach()).abs().max().item()
    loss_err = rel(dump["steps"][0]["loss"], loss.item())
    print(f"[vocab {V}] logits max abs diff {logits_err:.3g}, loss rel diff {loss_err:.3g}")
    assert logits_err <= LOGITS_ABS
    assert loss_err <= LOSS_REL

    cpp_grads, _ = load_checkpoint(str(dump["dir"] / "grads_step0.tinygpt"))
    errors = {}
    for name, p in model.named_parameters():
        if name.endswith("attn.k_proj.bias"):  # exactly zero on both sides (see test_parity.py)
            continue
        scale = p.grad.abs().max().item()
        errors[name] = (cpp_grads[name] - p.grad).abs().max().item() / scale
    print(
        f"[vocab {V}] tok_emb.weight gradient rel err {errors['tok_emb.weight']:.3g}, worst {max(errors.values()):.3g}"
    )
    bad = {k: v for k, v in errors.items() if v > GRAD_REL}
    assert not bad, f"gradients beyond {GRAD_REL} (max abs err / max abs grad): {bad}"


def test_training_steps(dump):
    tc = dump["train_config"]
    model = TinyGPT.from_checkpoint(str(dump["dir"] / "init.tinygpt"))
    optimizer = opt.make_optimizer(
        model,
        lr=tc["lr"],
        betas=(tc["beta1"], tc["beta2"]),
        eps=tc["eps"],
        weight_decay=tc["weight_decay"],
    )
    errs = []
    for i, s in enumerate(dump["steps"]):
        x, y = batch(dump, i)
        opt.set_lr(optimizer, s["lr"])
        _, loss = model(x, y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        opt.clip_gradients(model, tc["grad_clip"])
        optimizer.step()
        errs.append(rel(s["loss"], loss.item()))
    print(f"[vocab {dump['vocab']}] training losses rel diff {max(errs):.3g}")
    assert max(errs) <= TRAIN_LOSS_REL, f"losses differ: {errs}"
