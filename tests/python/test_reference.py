"""Self-checks of python_ref that need no C++ build."""

import math
import os
import struct
import sys
import json

import pytest
import torch

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))

from python_ref.checkpoint import (
    join_state,
    load_checkpoint,
    make_metadata,
    save_checkpoint,  # noqa: E402
    split_state,
)
from python_ref.model import PRESETS, GPTConfig, TinyGPT, param_count, preset_config  # noqa: E402
from python_ref import optim as opt  # noqa: E402
from python_ref.sample import filter_logits, generate  # noqa: E402

SPEC_PARAMS = {
    "tiny": 70_464,
    "small": 366_432,
    "medium": 838_400,
    "large": 2_743_296,
    "xl": 6_416_896,
    "huge": 9_608_704,
    "massive": 25_039_872,
    "mega": 25_138_176,
    "behemoth": 473_244_160,
}


@pytest.mark.parametrize("name", ["tiny", "small"])
def test_param_count_of_built_model(name):
    cfg, _ = preset_config(name)
    assert TinyGPT(cfg).num_params() == SPEC_PARAMS[name]


def test_param_count_formula_all_presets():
    assert set(PRESETS) == set(SPEC_PARAMS)
    for name, expected in SPEC_PARAMS.items():
        assert param_count(preset_config(name)[0]) == expected, name


def test_state_dict_names_are_the_spec_names():
    cfg, _ = preset_config("tiny")
    sd = TinyGPT(cfg).state_dict()
    d, L = cfg.d_model, cfg.n_layers
    expected = {"tok_emb.weight": [256, d], "pos_emb.weight": [cfg.ctx, d], "ln_f.weight": [d], "ln_f.bias": [d]}
    for i in range(L):
        p = f"blocks.{i}."
        for ln in ("ln1", "ln2"):
            expected[p + ln + ".weight"] = [d]
            expected[p + ln + ".bias"] = [d]
        for proj in ("q_proj", "k_proj", "v_proj", "o_proj"):
            expected[p + f"attn.{proj}.weight"] = [d, d]
            expected[p + f"attn.{proj}.bias"] = [d]
        expected[p + "mlp.fc_in.weight"] = [4 * d, d]
        expected[p + "mlp.fc_in.bias"] = [4 * d]
        expected[p + "mlp.fc_out.weight"] = [d, 4 * d]
        expected[p + "mlp.fc_out.bias"] = [d]
    assert {k: list(v.shape) for k, v in sd.items()} == expected


def test_init_statistics():
    torch.manual_seed(0)
    cfg, _ = preset_config("small")
    sd = TinyGPT(cfg).state_dict()
    assert abs(sd["tok_emb.weight"].std().item() - 0.02) < 0.002
    assert abs(sd["blocks.0.mlp.fc_out.weight"].std().item() - 0.02 / math.sqrt(6)) < 0.001
    assert torch.all(sd["blocks.1.ln1.weight"] == 1) and torch.all(sd["blocks.1.attn.q_proj.bias"] == 0)


def test_checkpoint_round_trip_and_layout(tmp_path):
    cfg, _ = preset_config("tiny")
    model = TinyGPT(cfg)
    weights = model.state_dict()
    m = {k: torch.randn_like(v) for k, v in weights.items()}
    v = {k: torch.rand_like(t) for k, t in weights.items()}
    meta = make_metadata(
        cfg.to_dict(), train_config={"lr": 3e-4}, train_state={"step": 7}, loss_history=[{"step": 7, "train_loss": 5.0}]
    )
    extra = {"ids": torch.arange(5, dtype=torch.int32)}
    path = tmp_path / "a.tinygpt"
    save_checkpoint(str(path), {**join_state(weights, m, v), **extra}, meta)

    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    assert (8 + n) % 8 == 0
    header = json.loads(raw[8 : 8 + n])
    assert header["__metadata__"]["format"] == "tinygpt"
    assert json.loads(header["__metadata__"]["model_config"]) == cfg.to_dict()

    state, meta2 = load_checkpoint(str(path))
    assert meta2 == meta
    w2, m2, v2 = split_state(state)
    assert state["ids"].dtype == torch.int32 and state["ids"].tolist() == list(range(5))
    for k in weights:
        assert torch.equal(w2[k], weights[k]) and torch.equal(m2[k], m[k]) and torch.equal(v2[k], v[k])

    save_checkpoint(str(tmp_path / "b.tinygpt"), join_state(weights, m, v), meta)
    model2 = TinyGPT.from_checkpoint(str(tmp_path / "b.tinygpt"))
    idx = torch.randint(0, 256, (2, 10))
    assert torch.equal(model(idx)[0], model2(idx)[0])


def test_forward_loss_and_mask():
    torch.manual_seed(1)
    cfg = GPTConfig(n_layers=2, d_model=48, n_heads=3, ctx=32)
    model = TinyGPT(cfg)
    idx = torch.randint(0, 256, (3, 32))
    tgt = torch.randint(0, 256, (3, 32))
    logits, loss = model(idx, tgt)
    assert logits.shape == (3, 32, 256)
    assert abs(loss.item() - math.log(256)) < 0.1  # near-uniform at init
    mask = torch.zeros(3, 32)
    mask[1, 5:] = 1
    _, masked = model(idx, tgt, mask)
    ref = torch.nn.functional.cross_entropy(logits[1, 5:], tgt[1, 5:])
    assert torch.allclose(masked, ref, rtol=1e-6)
    # causal: changing a future token leaves earlier logits untouched
    idx2 = idx.clone()
    idx2[:, 20] = (idx2[:, 20] + 1) % 256
    assert torch.equal(model(idx2)[0][:, :20], logits[:, :20])


def test_lr_schedule():
    assert opt.warmup_steps(1500) == 100 and opt.warmup_steps(50) == 5 and opt.warmup_steps(50, 3) == 3
    assert opt.lr_at(0, 1000, 1e-3) == pytest.approx(1e-5)
    assert opt.lr_at(99, 1000, 1e-3) == pytest.approx(1e-3)
    assert opt.lr_at(100, 1000, 1e-3) == pytest.approx(1e-3)
    assert opt.lr_at(1000, 1000, 1e-3) == pytest.approx(1e-4)
    assert opt.lr_at(550, 1000, 1e-3) == pytest.approx(1e-4 + 0.5 * 9e-4)
    assert opt.lr_at(7, 1000, 1e-3, "constant") == 1e-3


def test_training_reduces_loss_and_resumes(tmp_path):
    torch.manual_seed(0)
    cfg = GPTConfig(n_layers=1, d_model=32, n_heads=2, ctx=16)
    model = TinyGPT(cfg)
    optimizer = opt.make_optimizer(model, lr=3e-3)
    decay, no_decay = optimizer.param_groups
    assert decay["weight_decay"] == 0.1 and no_decay["weight_decay"] == 0.0
    assert all(p.dim() == 2 for p in decay["params"]) and all(p.dim() == 1 for p in no_decay["params"])
    x = torch.randint(0, 256, (4, 16))
    y = torch.roll(x, -1, dims=1)
    losses = []
    for _ in range(30):
        _, loss = model(x, y)
        optimizer.zero_grad()
        loss.backward()
        opt.clip_gradients(model, 1.0)
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0] - 1.0

    m, v, step = opt.export_moments(model, optimizer)
    assert step == 30 and set(m) == set(dict(model.named_parameters()))
    path = str(tmp_path / "r.tinygpt")
    save_checkpoint(path, join_state(model.state_dict(), m, v), make_metadata(cfg.to_dict()))
    state, _ = load_checkpoint(path)
    w, m2, v2 = split_state(state)
    model2 = TinyGPT(cfg)
    model2.load_state_dict(w)
    opt2 = opt.make_optimizer(model2, lr=3e-3)
    opt.import_moments(model2, opt2, m2, v2, step)
    for mdl, o in ((model, optimizer), (model2, opt2)):
        _, loss = mdl(x, y)
        o.zero_grad()
        loss.backward()
        opt.clip_gradients(mdl, 1.0)
        o.step()
    for (k, a), b in zip(model.state_dict().items(), model2.state_dict().values()):
        assert torch.equal(a, b), k


def test_sampling():
    torch.manual_seed(0)
    model = TinyGPT(GPTConfig(n_layers=1, d_model=32, n_heads=2, ctx=8))
    greedy = generate(model, b"hello", 20, temperature=0)
    assert greedy == generate(model, b"hello", 20, temperature=0) and len(greedy) == 20
    a = generate(model, b"hello", 20, temperature=1.0, top_k=10, top_p=0.9, seed=5)
    assert a == generate(model, b"hello", 20, temperature=1.0, top_k=10, top_p=0.9, seed=5)
    # past the context the window is cropped with positions from 0
    tokens = list(b"abcdefghijkl")
    logits, _ = model(torch.tensor([tokens[-8:]]))
    assert generate(model, bytes(tokens), 1, temperature=0)[0] == int(logits[0, -1].argmax())
    # filters
    probs = filter_logits(torch.tensor([3.0, 2.0, 1.0, 0.0]), 1.0, top_k=2)
    assert probs[2] == 0 and probs[3] == 0 and abs(probs.sum().item() - 1) < 1e-6
    probs = filter_logits(torch.tensor([10.0, 0.0, 0.0, 0.0]), 1.0, top_p=0.5)
    assert probs.tolist() == [1.0, 0.0, 0.0, 0.0]
    p = torch.softmax(torch.tensor([2.0, 1.0, 0.5, 0.0]), -1)
    probs = filter_logits(torch.tensor([2.0, 1.0, 0.5, 0.0]), 1.0, top_p=float(p[0] + p[1]) - 1e-4)
    assert (probs > 0).tolist() == [True, True, False, False]
