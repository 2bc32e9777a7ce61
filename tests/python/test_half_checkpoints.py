"""Half-precision checkpoints written by `ptl export --dtype f16|bf16` in python_ref: the weights
load widened to float32, equal to PyTorch's own rounding of the F32 weights (round to nearest
even), the model's logits stay within a small bound of the F32 model's, and python_ref's greedy
text on the half file is the engine's.

Environment: PTL_BUILD_DIR (default <repo>/build), where `ptl` is built.
"""

import json
import struct
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
from python_ref.checkpoint import load_checkpoint  # noqa: E402
from python_ref.model import TinyGPT  # noqa: E402
from python_ref.sample import generate  # noqa: E402

from ptl_cli import PTL, ptl  # noqa: E402

pytestmark = pytest.mark.skipif(not PTL.exists(), reason=f"{PTL} not built")

TEXT = b"the king and queen of a house shall speak to thee, my lord. what say you?\n" * 300


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    d = tmp_path_factory.mktemp("half")
    (d / "t.txt").write_bytes(TEXT)
    ptl("train", "--preset", "tiny", "--data", d / "t.txt", "--steps", 60, "--sample-every", 0, "--out", d / "run")
    files = {}
    for dtype in ("f32", "f16", "bf16"):
        files[dtype] = d / f"w_{dtype}.tinygpt"
        ptl("export", d / "run" / "model.tinygpt", "--out", files[dtype], "--dtype", dtype)
    return d, files


def header(path):
    raw = Path(path).read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    return json.loads(raw[8 : 8 + n])


def logits_of(path, idx):
    model = TinyGPT.from_checkpoint(path)
    model.eval()
    with torch.no_grad():
        logits, _ = model(idx)
    return logits


@pytest.mark.parametrize(
    "dtype,file_dtype,torch_dtype,bound",
    [("f16", "F16", torch.float16, 0.01), ("bf16", "BF16", torch.bfloat16, 0.1)],
)
def test_half_exports_load_widened_and_match_the_f32_model(exports, dtype, file_dtype, torch_dtype, bound):
    _, files = exports
    h = header(files[dtype])
    assert {t["dtype"] for k, t in h.items() if k != "__metadata__"} == {file_dtype}
    assert h["__metadata__"] == header(files["f32"])["__metadata__"]

    wide, meta = load_checkpoint(files["f32"])
    half, half_meta = load_checkpoint(files[dtype])
    assert half_meta == meta
    assert set(half) == set(wide)
    for name, t in half.items():
        assert t.dtype == torch.float32, name
        # The engine's rounding is PyTorch's: round to nearest even.
        assert torch.equal(t, wide[name].to(torch_dtype).float()), name

    idx = torch.tensor([list(TEXT[:32]), list(TEXT[100:132])], dtype=torch.long)
    diff = (logits_of(files[dtype], idx) - logits_of(files["f32"], idx)).abs().max().item()
    assert 0 < diff < bound, diff


def test_python_ref_greedy_text_on_a_half_file_is_the_engines(exports):
    _, files = exports
    prompt = b"the king "
    model = TinyGPT.from_checkpoint(files["f16"])
    ours = ptl("sample", files["f16"], "--prompt", prompt.decode(), "--max-tokens", 100, "--temperature", 0, "--raw")
    theirs = prompt + bytes(generate(model, prompt, 100, temperature=0))
    assert ours == theirs + b"\n"


def test_an_unsupported_dtype_names_the_tensor_and_the_dtype(exports, tmp_path):
    _, files = exports
    raw = files["bf16"].read_bytes().replace(b'"ln_f.bias":{"dtype":"BF16"', b'"ln_f.bias":{"dtype":"BF17"', 1)
    odd = tmp_path / "odd.tinygpt"
    odd.write_bytes(raw)
    with pytest.raises(ValueError, match="tensor ln_f.bias has dtype BF17; only F32, F16, BF16 and I32"):
        load_checkpoint(odd)
