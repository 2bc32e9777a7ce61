"""`ptl import-hf` and `ptl export-hf` against python_ref's own reader and writer of Hugging Face
GPT-2 folders (python_ref/hf.py): a random GPT-2 that PyTorch writes in that layout (F32 in one
file; BF16 in two shards, with the names GPT2LMHeadModel saves and a tied lm_head.weight) imports
into ptl with python_ref's logits (1e-4) and greedy tokens; what ptl exports reads back in
python_ref with the same weights, bitwise; a bad folder fails with one line naming the file.

The models are small (vocabulary 300, 2 layers, d 32, ctx 64) with GPT-2's tanh GELU.
Environment: PTL_BUILD_DIR (default <repo>/build), where `ptl` and tests/ptl_program_run are built.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
from python_ref.hf import load_hf_gpt2, save_hf_gpt2  # noqa: E402
from python_ref.model import GPTConfig, TinyGPT  # noqa: E402
from python_ref.sample import generate  # noqa: E402

from ptl_cli import PTL, RUN  # noqa: E402

pytestmark = pytest.mark.skipif(not (PTL.exists() and RUN.exists()), reason=f"{PTL} or {RUN} not built")

LOGITS_ABS = 1e-4
PROMPT = [5, 260, 17, 299, 42, 0, 128, 7, 280, 33, 64, 250]  # ids above 255 too
GREEDY = 12


def ptl(*args, ok=True):
    r = subprocess.run([str(PTL), *map(str, args)], capture_output=True, text=True)
    if ok:
        assert r.returncode == 0, r.stderr
    return r


def random_gpt2(seed=0, gelu="tanh"):
    torch.manual_seed(seed)
    model = TinyGPT(GPTConfig(vocab_size=300, n_layers=2, d_model=32, n_heads=4, ctx=64, gelu=gelu))
    with torch.no_grad():  # every tensor non-trivial, and logits spread enough for a clear argmax
        for p in model.parameters():
            p.add_(0.3 * torch.randn_like(p))
    return model.eval()


def engine(checkpoint, tmp_path):
    """ptl's logits on PROMPT and its greedy continuation (tests/parity/program_run.cpp, mode model)."""
    out = tmp_path / "engine.json"
    cmd = [str(RUN), "model", "--checkpoint", str(checkpoint), "--tokens", ",".join(map(str, PROMPT))]
    cmd += ["--greedy", str(GREEDY), "--out", str(out)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    result = json.loads(out.read_text())
    return torch.tensor(result["logits"]), result["greedy"]


@pytest.mark.parametrize("dtype, shards", [(torch.float32, 1), (torch.bfloat16, 2)], ids=["f32", "bf16-sharded"])
def test_imported_model_gives_python_refs_logits_and_greedy_tokens(tmp_path, dtype, shards):
    model = random_gpt2()
    folder = tmp_path / "hf"
    head = {"lm_head.weight": model.tok_emb.weight.detach().to(dtype)}  # tied, as GPT2LMHeadModel may save it
    save_hf_gpt2(model, folder, dtype=dtype, shards=shards, extra=head)
    out = ptl("import-hf", folder, "--out", tmp_path / "m.tinygpt").stdout
    assert "vocab 300, gelu tanh" in out
    assert ("2 shards, BF16" if shards == 2 else "model.safetensors, F32") in out

    reference = load_hf_gpt2(folder)  # the weights as stored (BF16 widened)
    if dtype == torch.float32:
        for name, t in model.state_dict().items():
            assert torch.equal(reference.state_dict()[name], t), name
    with torch.no_grad():
        want, _ = reference(torch.tensor([PROMPT]))
    got, greedy = engine(tmp_path / "m.tinygpt", tmp_path)
    err = (got - want[0]).abs().max().item()
    print(f"[hf import {dtype}] logits max abs diff {err:.2e}")
    assert err <= LOGITS_ABS
    assert greedy == generate(reference, PROMPT, GREEDY, temperature=0)


def test_export_reads_back_in_python_ref_bitwise(tmp_path):
    model = random_gpt2(seed=1)
    save_hf_gpt2(model, tmp_path / "hf")
    ptl("import-hf", tmp_path / "hf", "--out", tmp_path / "m.tinygpt")
    out = ptl("export-hf", tmp_path / "m.tinygpt", "--out", tmp_path / "exported").stdout
    assert "activation gelu_new" in out
    back = load_hf_gpt2(tmp_path / "exported")
    for name, t in model.state_dict().items():
        assert torch.equal(back.state_dict()[name], t), name
    assert json.loads((tmp_path / "exported" / "config.json").read_text())["activation_function"] == "gelu_new"
    # What python_ref writes and what ptl writes are the same bytes.
    assert (tmp_path / "exported" / "model.safetensors").read_bytes() == (
        tmp_path / "hf" / "model.safetensors"
    ).read_bytes()


def test_the_exact_gelu_travels_as_gelu(tmp_path):
    model = random_gpt2(gelu="erf")
    save_hf_gpt2(model, tmp_path / "hf")
    assert "gelu erf" in ptl("import-hf", tmp_path / "hf", "--out", tmp_path / "m.tinygpt").stdout
    with torch.no_grad():
        want, _ = model(torch.tensor([PROMPT]))
    got, _ = engine(tmp_path / "m.tinygpt", tmp_path)
    assert (got - want[0]).abs().max().item() <= LOGITS_ABS


def error_of(folder, tmp_path):
    r = ptl("import-hf", folder, "--out", tmp_path / "bad.tinygpt", ok=False)
    assert r.returncode == 1
    assert r.stderr.count("\n") == 1, r.stderr
    assert not (tmp_path / "bad.tinygpt").exists()
    return r.stderr


def test_bad_folders_fail_with_one_line_naming_the_file(tmp_path):
    model = random_gpt2()
    # Truncated: the second shard cut short.
    folder = tmp_path / "cut"
    save_hf_gpt2(model, folder, dtype=torch.bfloat16, shards=2)
    shard = folder / "model-00002-of-00002.safetensors"
    shard.write_bytes(shard.read_bytes()[:-50])
    assert "model-00002-of-00002.safetensors: tensor 'transformer.ln_f.bias' offsets lie outside" in error_of(
        folder, tmp_path
    )
    # Mis-named: a tensor under a name GPT-2 does not have (and so the right one missing).
    folder = tmp_path / "misnamed"
    save_hf_gpt2(model, folder, extra={"transformer.h.0.attn.c_atn.weight": torch.zeros(32, 96)})
    assert "model.safetensors: unexpected tensor 'transformer.h.0.attn.c_atn.weight' (not a GPT-2 weight" in error_of(
        folder, tmp_path
    )
    # Mis-shaped: config.json says 32 positions, wpe holds 64.
    folder = tmp_path / "misshaped"
    save_hf_gpt2(model, folder)
    config = json.loads((folder / "config.json").read_text())
    config["n_positions"] = 32
    (folder / "config.json").write_text(json.dumps(config))
    assert "tensor 'transformer.wpe.weight' has shape [64, 32] but config.json needs [32, 32]" in error_of(
        folder, tmp_path
    )
    # Not GPT-2.
    config["model_type"] = "llama"
    (folder / "config.json").write_text(json.dumps(config))
    assert 'config.json: model_type is "llama"; only "gpt2" is read' in error_of(folder, tmp_path)
