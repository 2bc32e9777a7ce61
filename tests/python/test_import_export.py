"""`ptl import` and `ptl export` against PyTorch: a model saved from PyTorch as a bare safetensors
file (the spec's names, no ptl metadata) becomes a ptl checkpoint with the same weights, on which
the engine's greedy continuation is PyTorch's; `ptl export` gives PyTorch the weights without
the optimizer moments.

Environment: PTL_BUILD_DIR (default <repo>/build), where `ptl` is built.
"""

import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
from python_ref.checkpoint import load_checkpoint, save_checkpoint  # noqa: E402
from python_ref.model import TinyGPT, preset_config  # noqa: E402
from python_ref.sample import generate  # noqa: E402

from ptl_cli import PTL, ptl  # noqa: E402

pytestmark = pytest.mark.skipif(not PTL.exists(), reason=f"{PTL} not built")


def test_a_pytorch_model_imports_and_generates_the_same_text(tmp_path):
    torch.manual_seed(3)
    cfg, _ = preset_config("tiny")
    model = TinyGPT(cfg)
    with torch.no_grad():  # non-zero biases and gains, so that every tensor matters
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    bare = tmp_path / "from_pytorch.safetensors"
    save_checkpoint(bare, model.state_dict(), {})  # no ptl metadata at all
    out = ptl("import", bare, "--out", tmp_path / "m.tinygpt").decode()
    assert "2 layers, d 48, 3 heads, ctx 32" in out

    state, meta = load_checkpoint(tmp_path / "m.tinygpt")
    assert meta["format"] == "tinygpt"
    for name, t in model.state_dict().items():
        assert torch.equal(state[name], t), name

    prompt = b"ROMEO:"
    ours = ptl(
        "sample", tmp_path / "m.tinygpt", "--prompt", prompt.decode(), "--max-tokens", 60, "--temperature", 0, "--raw"
    )
    theirs = prompt + bytes(generate(model, prompt, 60, temperature=0))
    assert ours == theirs + b"\n"  # ptl ends the output with one newline


def test_export_leaves_the_optimizer_state_out(tmp_path):
    data = tmp_path / "t.txt"
    data.write_bytes(b"the king and queen of a house shall speak to thee, my lord.\n" * 200)
    ptl(
        "train",
        "--preset",
        "tiny",
        "--data",
        data,
        "--steps",
        4,
        "--eval-every",
        2,
        "--sample-every",
        0,
        "--out",
        tmp_path / "run",
    )
    ptl("export", tmp_path / "run" / "model.tinygpt", "--out", tmp_path / "w.safetensors")
    full, meta_full = load_checkpoint(tmp_path / "run" / "model.tinygpt")
    light, meta = load_checkpoint(tmp_path / "w.safetensors")
    assert any(k.startswith("optim.") for k in full)
    assert not any(k.startswith("optim.") for k in light)
    assert set(light) == {k for k in full if not k.startswith("optim.")}
    for k, t in light.items():
        assert torch.equal(t, full[k]), k
    assert meta["train_state"] == meta_full["train_state"]
    TinyGPT.from_checkpoint(tmp_path / "w.safetensors")  # loads as a model
