"""A checkpoint over a BPE tokenizer in python_ref: it loads (the tokenizer.json recorded in the
metadata, checked against its sha256), decodes the engine's ids back to the text, and gives the
engine's loss and bits per byte on a text.

Environment: PTL_BUILD_DIR (default <repo>/build), where `ptl` is built.
"""

import json
import math
import random
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
from python_ref.checkpoint import load_checkpoint  # noqa: E402
from python_ref.model import TinyGPT  # noqa: E402
from python_ref.sample import main as sample_main  # noqa: E402
from python_ref.tokenizer import CheckpointTokenizer  # noqa: E402

from ptl_cli import PTL, ptl  # noqa: E402

pytestmark = pytest.mark.skipif(not PTL.exists(), reason=f"{PTL} not built")


def syllable_text(n, seed):
    """Made-up words: enough distinct pairs for a 300-token tokenizer."""
    rng = random.Random(seed)
    syl = ["ka", "to", "ri", "men", "sa", "lo", "ve", "dun", "pi", "ra", "tha", "mo", "el", "qui"]
    out = []
    size = 0
    while size < n:
        w = "".join(rng.choice(syl) for _ in range(rng.randint(1, 3))) + rng.choice([" ", " ", ", ", ". ", "\n"])
        out.append(w)
        size += len(w)
    return "".join(out)[:n]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    d = tmp_path_factory.mktemp("bpe")
    (d / "t.txt").write_text(syllable_text(20000, 7))
    ptl("tokenizer", "train", "--data", d / "t.txt", "--vocab-size", 300, "--out", d / "tok.json")
    ptl(
        "train",
        "--preset",
        "tiny",
        "--tokenizer",
        d / "tok.json",
        "--data",
        d / "t.txt",
        "--steps",
        8,
        "--eval-every",
        4,
        "--sample-every",
        0,
        "--out",
        d / "run",
    )
    return d


def test_python_ref_reads_the_tokenizer_and_decodes_the_engines_ids(run):
    model, meta = TinyGPT.from_checkpoint(run / "run" / "model.tinygpt", return_metadata=True)
    assert model.config.vocab_size == 300
    tok = CheckpointTokenizer(meta)
    assert tok.type == "bpe" and tok.vocab_size == 300
    assert meta["tokenizer_json"] == (run / "tok.json").read_text()  # the canonical tokenizer.json
    text = (run / "t.txt").read_bytes()[:3000]
    (run / "e.txt").write_bytes(text)
    ids = json.loads(
        ptl("tokenizer", "encode", "--tokenizer", run / "run" / "model.tinygpt", "--data", run / "e.txt", "--json")
    )["ids"]
    assert max(ids) >= 256 and len(ids) < len(text)
    assert tok.decode(ids) == text


def test_python_ref_gives_the_engines_loss_and_bits_per_byte(run):
    model = TinyGPT.from_checkpoint(run / "run" / "model.tinygpt")
    model.eval()
    tok = CheckpointTokenizer(load_checkpoint(run / "run" / "model.tinygpt")[1])
    text = (run / "t.txt").read_bytes()[5000:8000]
    (run / "e.txt").write_bytes(text)
    ids = json.loads(ptl("tokenizer", "encode", "--tokenizer", run / "tok.json", "--data", run / "e.txt", "--json"))[
        "ids"
    ]
    ours = json.loads(ptl("eval", run / "run" / "model.tinygpt", "--data", run / "e.txt", "--json"))
    # The windows of `ptl eval --data`: consecutive, ctx tokens each, every token after the first predicted once.
    ctx = model.config.ctx
    nats, n = 0.0, 0
    with torch.no_grad():
        for s in range(0, len(ids) - 1, ctx):
            x = torch.tensor([ids[s : s + ctx]])[:, : len(ids) - 1 - s]
            y = torch.tensor([ids[s + 1 : s + 1 + x.shape[1]]])
            logits, _ = model(x)
            nats += F.cross_entropy(logits[0].double(), y[0], reduction="sum").item()
            n += y.shape[1]
    nbytes = len(text) - len(tok.token_bytes(ids[0]))
    assert ours["tokens"] == n and ours["bytes"] == nbytes
    assert ours["loss"] == pytest.approx(nats / n, rel=1e-5)
    assert ours["bits_per_byte"] == pytest.approx(nats / (nbytes * math.log(2)), rel=1e-5)


def test_python_ref_sample_refuses_a_bpe_checkpoint_clearly(run):
    with pytest.raises(ValueError, match="reads a BPE tokenizer: sample it with ptl sample"):
        sample_main([str(run / "run" / "model.tinygpt"), "--max-tokens", "3"])
