"""PEFT LoRA adapter folders (`ptl lora export-peft`, `import-peft`) read with plain PyTorch.

A random byte-level GPT-2 that python_ref writes as a Hugging Face folder is imported, a LoRA
adapter on GPT-2's modules (the fused c_attn, attn.c_proj, mlp.c_fc, mlp.c_proj) trains a few
steps with `ptl lora train`, and `ptl lora export-peft` writes it as PEFT would. Then:

- the merge PEFT does for Conv1D layers (fan_in_fan_out: W [in, out] += ((alpha / r) B A)^T),
  computed here with torch from adapter_config.json and adapter_model.safetensors on the base's
  Hugging Face weights, equals `ptl lora merge` exported with `ptl export-hf` (1e-6);
- python_ref's own LoRA (python_ref/lora.py, QKVLoRA with PEFT's one B [3d, r]) loaded from the
  PEFT tensors gives the merged model's logits (1e-4).

Environment: PTL_BUILD_DIR (default <repo>/build), where `ptl` is built.
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
from python_ref.checkpoint import load_checkpoint  # noqa: E402
from python_ref.hf import load_hf_gpt2, save_hf_gpt2  # noqa: E402
from python_ref.lora import apply_lora  # noqa: E402
from python_ref.model import GPTConfig, TinyGPT  # noqa: E402

BUILD = Path(os.environ.get("PTL_BUILD_DIR", REPO / "build"))
PTL = BUILD / "ptl"
pytestmark = pytest.mark.skipif(not PTL.exists(), reason=f"{PTL} not built")

PREFIX = "base_model.model.transformer."
MODULES = {"c_attn": "attn.c_attn", "attn.c_proj": "attn.c_proj", "c_fc": "mlp.c_fc", "mlp.c_proj": "mlp.c_proj"}


def load_file(path):
    return load_checkpoint(str(path))[0]


def ptl(*args, cwd=None):
    r = subprocess.run([str(PTL), *map(str, args)], capture_output=True, text=True, cwd=cwd)
    assert r.returncode == 0, r.stderr
    return r.stdout


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    d = tmp_path_factory.mktemp("peft")
    torch.manual_seed(3)
    model = TinyGPT(GPTConfig(vocab_size=256, n_layers=2, d_model=32, n_heads=4, ctx=32, gelu="tanh"))
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.1 * torch.randn_like(p))
    save_hf_gpt2(model, d / "hf")
    ptl("import-hf", d / "hf", "--out", d / "base.tinygpt")
    text = ("the king and the queen of a house shall speak to thee, my lord. " * 200).encode()
    (d / "t.txt").write_bytes(text)
    ptl(
        "lora",
        "train",
        "--base",
        d / "base.tinygpt",
        "--data",
        d / "t.txt",
        "--steps",
        5,
        "--batch",
        2,
        "--lr",
        2e-2,
        "--rank",
        4,
        "--alpha",
        12,
        "--eval-every",
        0,
        "--targets",
        "qkv,o,fc_in,fc_out",
        "--out",
        d / "run",
    )
    adapter = d / "run" / "adapter.tinygpt-lora"
    ptl("lora", "export-peft", adapter, "--out", d / "peft", "--base-model", "gpt2-random")
    ptl("lora", "merge", "--base", d / "base.tinygpt", "--adapter", adapter, "--out", d / "merged.tinygpt")
    ptl("export-hf", d / "merged.tinygpt", "--out", d / "merged-hf")
    return d


def test_adapter_config_is_peft_lora_for_gpt2(run):
    cfg = json.loads((run / "peft" / "adapter_config.json").read_text())
    assert cfg["peft_type"] == "LORA"
    assert cfg["r"] == 4 and cfg["lora_alpha"] == 12
    assert cfg["target_modules"] == ["c_attn", "attn.c_proj", "c_fc", "mlp.c_proj"]
    assert cfg["fan_in_fan_out"] is True and cfg["bias"] == "none"
    assert cfg["base_model_name_or_path"] == "gpt2-random"
    tensors = load_file(str(run / "peft" / "adapter_model.safetensors"))
    assert len(tensors) == 2 * 4 * 2
    assert tensors[PREFIX + "h.0.attn.c_attn.lora_A.weight"].shape == (4, 32)
    assert tensors[PREFIX + "h.0.attn.c_attn.lora_B.weight"].shape == (96, 4)
    assert tensors[PREFIX + "h.1.mlp.c_proj.lora_A.weight"].shape == (4, 128)


def test_peft_merge_equals_ptl_lora_merge(run):
    """PEFT's merge of a Conv1D layer, here with torch, against ptl's merge exported to GPT-2's layout."""
    cfg = json.loads((run / "peft" / "adapter_config.json").read_text())
    scale = cfg["lora_alpha"] / cfg["r"]
    lora = load_file(str(run / "peft" / "adapter_model.safetensors"))
    base = load_file(str(run / "hf" / "model.safetensors"))
    merged = load_file(str(run / "merged-hf" / "model.safetensors"))
    assert set(base) == set(merged)
    changed = set()
    for i in range(2):
        for listed in cfg["target_modules"]:
            module = f"h.{i}.{MODULES[listed]}"
            A = lora[f"{PREFIX}{module}.lora_A.weight"].double()
            B = lora[f"{PREFIX}{module}.lora_B.weight"].double()
            name = f"transformer.{module}.weight"
            want = (base[name].double() + scale * (B @ A).T).float()
            err = (want - merged[name]).abs().max().item()
            assert err <= 1e-6, f"{name}: {err}"
            assert (merged[name] - base[name]).abs().max().item() > 1e-5, f"{name}: the adapter did nothing"
            changed.add(name)
    for name in set(base) - changed:
        assert torch.equal(base[name], merged[name]), f"{name} is no adapted weight but changed"


def test_python_ref_fused_lora_reads_peft_tensors(run):
    """python_ref's LoRA with PEFT's tensors as they are (one c_attn B [3d, r]) is the merged model."""
    cfg = json.loads((run / "peft" / "adapter_config.json").read_text())
    lora = load_file(str(run / "peft" / "adapter_model.safetensors"))
    model = load_hf_gpt2(run / "hf")
    apply_lora(model, cfg["r"], cfg["lora_alpha"], ("qkv", "o", "fc_in", "fc_out"))
    ours = {
        "attn.c_attn": "attn.qkv",
        "attn.c_proj": "attn.o_proj",
        "mlp.c_fc": "mlp.fc_in",
        "mlp.c_proj": "mlp.fc_out",
    }
    state = {}
    for name, t in lora.items():
        i, rest = name[len(PREFIX) + 2 :].split(".", 1)  # "h.{i}.attn.c_attn.lora_A.weight"
        module, which = rest.rsplit(".", 2)[0], rest.rsplit(".", 2)[1]
        state[f"blocks.{i}.{ours[module]}.{which}"] = t
    missing = model.load_state_dict(state, strict=False)
    assert not missing.unexpected_keys
    assert not [k for k in missing.missing_keys if ".lora_" in k]
    merged = load_hf_gpt2(run / "merged-hf")
    x = torch.tensor([list(b"the king and the queen of a")])
    with torch.no_grad():
        err = (model.eval()(x)[0] - merged.eval()(x)[0]).abs().max().item()
    assert err < 1e-4, err


def test_import_peft_round_trip(run):
    """export-peft of import-peft: the same files."""
    ptl("lora", "import-peft", run / "peft", "--base", run / "base.tinygpt", "--out", run / "back.tinygpt-lora")
    ptl("lora", "export-peft", run / "back.tinygpt-lora", "--out", run / "peft2")
    for f in ("adapter_config.json", "adapter_model.safetensors"):
        assert (run / "peft" / f).read_bytes() == (run / "peft2" / f).read_bytes(), f
