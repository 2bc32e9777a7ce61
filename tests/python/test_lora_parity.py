"""Parity of the engine's LoRA and SFT (masked loss) training against the PyTorch reference.

`ptl_lora_dump` writes a base checkpoint, the initial adapter, 50 LoRA steps (batches with their
loss masks, learning rates, losses, gradient norms), the adapter gradients of the first and the
last step and the final adapter. PyTorch (python_ref/lora.py) recomputes all of it.

    PTL_BUILD_DIR=build-lora /usr/bin/python3 -m pytest tests/python/test_lora_parity.py -q -s

Three runs: SFT examples (masked loss) on Small with adapters on every projection, plain text
(no mask) on Tiny with the default q, v adapters, and plain text on Tiny with GPT-2's modules
(the fused qkv adapter, o, fc_in, fc_out).
"""

import json
import os
import random
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from python_ref import optim as opt  # noqa: E402
from python_ref.checkpoint import load_checkpoint  # noqa: E402
from python_ref.lora import (  # noqa: E402
    fuse_qkv,
    load_adapter,
    lora_parameters,
    lora_state_dict,
    merge_lora,
    save_adapter,
)
from python_ref.model import TinyGPT  # noqa: E402
from python_ref.sft import reply_mask, render_chat  # noqa: E402

BUILD = Path(os.environ.get("PTL_BUILD_DIR", REPO / "build"))
BINARY = BUILD / "tests" / "ptl_lora_dump"
STEPS = 50
SEED = 4242

LOSS_REL = 1e-4  # every step
GRAD_REL = 1e-4  # per adapter tensor: max |g_cpp - g_torch| / max |g_torch|
GRAD_NORM_REL = 1e-4
WEIGHT_ABS = 1e-4  # final adapters

RUNS = {
    "small-sft-all": dict(preset="small", data="sft", targets="all", rank=4, alpha=8.0, lr=1e-2),
    "tiny-text-qv": dict(preset="tiny", data="text", targets="q,v", rank=4, alpha=8.0, lr=1e-2),
    # GPT-2's modules as PEFT adapts them: the fused c_attn (one A, one B over q, k, v), c_proj,
    # c_fc, mlp.c_proj. At lr 1e-2 on this text, adapters on all four (as on q, k, v, o, fc_in,
    # fc_out) make 50 steps chaotic: fp32 rounding grows to percents by the last steps in both
    # layouts; at 3e-3 the two implementations stay within 2e-6.
    "tiny-text-gpt2-modules": dict(
        preset="tiny", data="text", targets="qkv,o,fc_in,fc_out", rank=4, alpha=8.0, lr=3e-3
    ),
}


def shakespeare():
    if os.environ.get("PTL_DATA_DIR"):
        return Path(os.environ["PTL_DATA_DIR"]) / "tinyshakespeare.txt"
    return REPO.parent / "shared" / "data" / "tinyshakespeare.txt"


def write_sft_examples(path, n=400, seed=7):
    """Short examples of both JSONL forms (some multi-turn, some with a system message)."""
    rng = random.Random(seed)
    letters = "abcdefghij"
    with open(path, "w") as f:
        for i in range(n):
            w = "".join(rng.choice(letters) for _ in range(rng.randint(2, 4)))
            if i % 5 == 0:
                msgs = [
                    {"role": "system", "content": "rev"},
                    {"role": "user", "content": w},
                    {"role": "assistant", "content": w[::-1]},
                ]
                f.write(json.dumps({"messages": msgs}) + "\n")
            else:
                f.write(json.dumps({"prompt": w, "response": w[::-1]}) + "\n")


REPORT = {}


def record(run, key, value):
    REPORT.setdefault(run, {})[key] = value
    print(f"[lora parity {run}] {key} = {value}")
    try:
        with open(BUILD / "lora_parity_report.json", "w") as f:
            json.dump(REPORT, f, indent=2, sort_keys=True)
    except OSError:
        pass


@pytest.fixture(scope="module", params=list(RUNS))
def dump(request, tmp_path_factory):
    name = request.param
    cfg = RUNS[name]
    if not BINARY.exists():
        pytest.skip(f"C++ LoRA dump binary not built: {BINARY} (build the project, or set PTL_BUILD_DIR)")
    out = tmp_path_factory.mktemp(f"lora_{name}")
    if cfg["data"] == "sft":
        data = out / "examples.jsonl"
        write_sft_examples(data)
    else:
        data = shakespeare()
        if not data.exists():
            pytest.skip(f"training data missing: {data} (set PTL_DATA_DIR)")
    cmd = [
        str(BINARY),
        "--preset",
        cfg["preset"],
        "--steps",
        str(STEPS),
        "--data",
        str(data),
        "--out",
        str(out),
        "--seed",
        str(SEED),
        "--rank",
        str(cfg["rank"]),
        "--alpha",
        str(cfg["alpha"]),
        "--targets",
        cfg["targets"],
        "--lr",
        str(cfg["lr"]),
    ]
    import subprocess

    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    with open(out / "dump.json") as f:
        info = json.load(f)
    info["dir"] = out
    info["name"] = name
    return info


def batch(info, step):
    B, T = info["batch"], info["ctx"]
    s = info["steps"][step]
    x = torch.tensor(s["inputs"], dtype=torch.long).view(B, T)
    y = torch.tensor(s["targets"], dtype=torch.long).view(B, T)
    m = torch.tensor(s["mask"], dtype=torch.float32).view(B, T) if "mask" in s else None
    return x, y, m


def model_with_adapter(info, adapter="adapter_init.tinygpt-lora"):
    model = TinyGPT.from_checkpoint(str(info["dir"] / "base.tinygpt"))
    load_adapter(model, str(info["dir"] / adapter), base_path=str(info["dir"] / "base.tinygpt"))
    return model


def grad_errors(cpp, model):
    cpp = fuse_qkv(cpp)  # the engine's q, k, v row blocks of a fused B as python_ref's one B
    errors = {}
    for name, p in model.named_parameters():
        if not p.requires_grad:
            assert p.grad is None, f"frozen {name} got a gradient"
            continue
        g = p.grad
        scale = g.abs().max().item()
        diff = (cpp[name] - g).abs().max().item()
        errors[name] = diff / scale if scale > 0 else diff
    return errors


def test_masks_follow_the_chat_template(dump):
    """Independently of the engine: the mask is 1 exactly on reply bytes and their <|end|>\\n."""
    if not dump["sft"]:
        pytest.skip("plain-text run: no mask")
    B, T = dump["batch"], dump["ctx"]
    for s in dump["steps"][:10]:
        for r in range(B):
            inputs = s["inputs"][r * T : (r + 1) * T]
            targets = s["targets"][r * T : (r + 1) * T]
            row = bytes([inputs[0]] + targets)  # the packed row of T + 1 bytes
            want = reply_mask(row)[1:]  # the mask of each target byte
            assert [int(v) for v in s["mask"][r * T : (r + 1) * T]] == want


def test_training_steps(dump):
    """50 LoRA steps: losses, gradient norms, adapter gradients of the first and last step, final adapters."""
    model = model_with_adapter(dump)
    params = lora_parameters(model)
    assert all(p.requires_grad for p in params)
    assert sum(p.requires_grad for p in model.parameters()) == len(params)
    lc = dump["lora_config"]
    tc = dump["train_config"]
    optimizer = torch.optim.AdamW(
        params,
        lr=tc["lr"],
        betas=(tc["beta1"], tc["beta2"]),
        eps=tc["eps"],
        weight_decay=lc.get("weight_decay", 0.0),
        foreach=False,
    )
    base_before = {k: v.clone() for k, v in model.state_dict().items() if ".lora_" not in k}
    loss_errs, norm_errs = [], []
    grads = {}
    for i, s in enumerate(dump["steps"]):
        x, y, m = batch(dump, i)
        opt.set_lr(optimizer, s["lr"])
        _, loss = model(x, y, m)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        norm = opt.clip_gradients(model, tc["grad_clip"])
        if i == 0:
            grads["first"] = grad_errors(load_checkpoint(str(dump["dir"] / "grads_first.safetensors"))[0], model)
        if i == len(dump["steps"]) - 1:
            grads["last"] = grad_errors(load_checkpoint(str(dump["dir"] / "grads_last.safetensors"))[0], model)
        optimizer.step()
        loss_errs.append(abs(s["loss"] - loss.item()) / abs(loss.item()))
        norm_errs.append(abs(s["grad_norm"] - norm) / max(norm, 1e-30))

    final, _ = load_checkpoint(str(dump["dir"] / "adapter_final.tinygpt-lora"))
    mine = lora_state_dict(model)
    assert set(final) == set(mine)
    weight_err = max((final[k] - v).abs().max().item() for k, v in mine.items())
    for k, v in model.state_dict().items():
        if ".lora_" not in k:
            assert torch.equal(v, base_before[k]), f"the frozen base changed: {k}"

    n = dump["name"]
    record(n, "train_loss_max_rel_diff", max(loss_errs))
    record(n, "train_loss_first_last_cpp", [dump["steps"][0]["loss"], dump["steps"][-1]["loss"]])
    record(n, "grad_norm_max_rel_diff", max(norm_errs))
    for which in ("first", "last"):
        worst = max(grads[which], key=grads[which].get)
        record(n, f"adapter_grad_{which}_step_max_rel_err", grads[which][worst])
        record(n, f"adapter_grad_{which}_step_worst_tensor", worst)
    record(n, "final_adapter_max_abs_diff", weight_err)
    assert max(loss_errs) <= LOSS_REL, f"loss differs at step {int(np.argmax(loss_errs))}: {max(loss_errs)}"
    assert max(norm_errs) <= GRAD_NORM_REL, f"grad norm differs at step {int(np.argmax(norm_errs))}"
    for which in ("first", "last"):
        bad = {k: v for k, v in grads[which].items() if v > GRAD_REL}
        assert not bad, f"adapter gradients of the {which} step beyond {GRAD_REL}: {bad}"
    assert weight_err <= WEIGHT_ABS
    assert dump["steps"][-1]["loss"] < dump["steps"][0]["loss"]


def test_step_zero_and_merge(dump):
    """With B = 0 the adapted model is the base; merging the trained adapter keeps the logits."""
    x, y, m = batch(dump, 0)
    base = TinyGPT.from_checkpoint(str(dump["dir"] / "base.tinygpt"))
    init = model_with_adapter(dump)
    trained = model_with_adapter(dump, "adapter_final.tinygpt-lora")
    with torch.no_grad():
        lb, _ = base(x)
        li, _ = init(x)
        lt, _ = trained(x)
        assert torch.equal(lb, li)
        merged = merge_lora(model_with_adapter(dump, "adapter_final.tinygpt-lora"))
        lm, _ = merged(x)
    err = (lm - lt).abs().max().item()
    record(dump["name"], "merge_logits_max_abs_diff", err)
    assert (lt - lb).abs().max().item() > 1e-3
    assert err < 1e-4


def test_python_adapter_files_round_trip(dump, tmp_path):
    """python_ref writes adapter files the same way: same tensors and metadata keys as the engine's."""
    model = model_with_adapter(dump, "adapter_final.tinygpt-lora")
    path = tmp_path / "py.tinygpt-lora"
    save_adapter(model, str(path), str(dump["dir"] / "base.tinygpt"))
    ours, meta = load_checkpoint(str(path))
    theirs, cpp_meta = load_checkpoint(str(dump["dir"] / "adapter_final.tinygpt-lora"))
    assert set(ours) == set(theirs) and all(torch.equal(ours[k], theirs[k]) for k in ours)
    for key in ("format", "format_version", "base_sha256", "base_weights_sha256"):
        assert meta[key] == cpp_meta[key], key
    assert json.loads(meta["model_config"]) == json.loads(cpp_meta["model_config"])
    assert json.loads(meta["lora_config"])["targets"] == json.loads(cpp_meta["lora_config"])["targets"]
    again = model_with_adapter(dump)
    load_adapter(again, str(path), base_path=str(dump["dir"] / "base.tinygpt"))
    x, _, _ = batch(dump, 0)
    with torch.no_grad():
        assert torch.equal(again(x)[0], model(x)[0])


def test_adapter_rejects_another_base(dump, tmp_path):
    other = TinyGPT.from_checkpoint(str(dump["dir"] / "base.tinygpt"))
    with pytest.raises(ValueError, match="other weights"):
        # Any other file stands for another base: its weights differ.
        load_adapter(
            other,
            str(dump["dir"] / "adapter_final.tinygpt-lora"),
            base_path=str(dump["dir"] / "adapter_init.tinygpt-lora"),
        )


def test_chat_template_matches_the_docs():
    msgs = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
    ]
    text, mask = render_chat(msgs)
    assert text == b"<|system|>\nBe brief.\n<|user|>\nhi\n<|assistant|>\nhello<|end|>\n"
    assert bytes(b for b, k in zip(text, mask) if k) == b"hello<|end|>\n"
    assert reply_mask(text) == mask
