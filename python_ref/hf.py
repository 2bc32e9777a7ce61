"""Hugging Face GPT-2 folders in PyTorch: the oracle for `ptl import-hf` and `ptl export-hf`.

    from python_ref.hf import save_hf_gpt2, load_hf_gpt2
    save_hf_gpt2(model, "folder", dtype=torch.bfloat16, shards=2)   # config.json + weights
    model = load_hf_gpt2("folder")                                   # a TinyGPT

The folder is what transformers' GPT2LMHeadModel.save_pretrained writes: config.json and
model.safetensors (or model-0000i-of-0000N.safetensors shards with model.safetensors.index.json).
GPT-2's names map to the spec's (docs/model.md) as engine/hf_gpt2.cpp maps them, written here a
second time on purpose, so that each side checks the other: wte -> tok_emb, wpe -> pos_emb,
h.{i}.ln_1 -> blocks.{i}.ln1, attn.c_attn -> q_proj | k_proj | v_proj (its output columns, in
that order), attn.c_proj -> o_proj, ln_2 -> ln2, mlp.c_fc -> fc_in, mlp.c_proj -> fc_out, ln_f.
GPT-2's Conv1D weights are [in, out] (y = x W + b): the transpose of a Linear weight.
"""

import json
import os

import torch

from .checkpoint import load_checkpoint, save_checkpoint
from .model import GPTConfig, TinyGPT

PREFIX = "transformer."


def config_dict(cfg, eos_id=None):
    """The config.json of a GPTConfig, as GPT2Config writes it (the keys `ptl export-hf` writes)."""
    return {
        "activation_function": "gelu_new" if cfg.gelu == "tanh" else "gelu",
        "architectures": ["GPT2LMHeadModel"],
        "attn_pdrop": 0.0,
        "bos_token_id": eos_id,
        "embd_pdrop": 0.0,
        "eos_token_id": eos_id,
        "initializer_range": 0.02,
        "layer_norm_epsilon": 1e-05,
        "model_type": "gpt2",
        "n_ctx": cfg.ctx,
        "n_embd": cfg.d_model,
        "n_head": cfg.n_heads,
        "n_inner": None,
        "n_layer": cfg.n_layers,
        "n_positions": cfg.ctx,
        "reorder_and_upcast_attn": False,
        "resid_pdrop": 0.0,
        "scale_attn_by_inverse_layer_idx": False,
        "scale_attn_weights": True,
        "tie_word_embeddings": True,
        "torch_dtype": "float32",
        "use_cache": True,
        "vocab_size": cfg.vocab_size,
    }


def config_from_dict(c, name="config.json"):
    """GPTConfig of a config.json, refusing what this architecture is not."""
    if c.get("model_type") != "gpt2":
        raise ValueError(f"{name}: model_type is {c.get('model_type')!r}; only 'gpt2' is read")
    d = c["n_embd"]
    if c.get("n_inner") not in (None, 4 * d):
        raise ValueError(f"{name}: n_inner {c['n_inner']} is not 4 x n_embd")
    act = c.get("activation_function", "gelu_new")
    if act not in ("gelu_new", "gelu_pytorch_tanh", "gelu"):
        raise ValueError(f"{name}: activation_function {act!r} is not supported")
    if abs(c.get("layer_norm_epsilon", 1e-5) - 1e-5) > 1e-11:
        raise ValueError(f"{name}: layer_norm_epsilon is not 1e-5")
    if not c.get("tie_word_embeddings", True):
        raise ValueError(f"{name}: tie_word_embeddings is false")
    return GPTConfig(
        vocab_size=c["vocab_size"],
        n_layers=c["n_layer"],
        d_model=d,
        n_heads=c["n_head"],
        ctx=c.get("n_positions", c.get("n_ctx")),
        gelu="erf" if act == "gelu" else "tanh",
    )


def hf_state_dict(model):
    """GPT-2's tensors (names without the prefix) of a TinyGPT, in GPT2Model's order."""
    sd = model.state_dict()
    out = {"wte.weight": sd["tok_emb.weight"], "wpe.weight": sd["pos_emb.weight"]}
    for i in range(model.config.n_layers):
        b, h = f"blocks.{i}.", f"h.{i}."
        out[h + "ln_1.weight"] = sd[b + "ln1.weight"]
        out[h + "ln_1.bias"] = sd[b + "ln1.bias"]
        qkv = [sd[b + f"attn.{p}_proj.weight"] for p in "qkv"]  # each [out, in]
        out[h + "attn.c_attn.weight"] = torch.cat(qkv, dim=0).t()  # [in, 3 out]
        out[h + "attn.c_attn.bias"] = torch.cat([sd[b + f"attn.{p}_proj.bias"] for p in "qkv"])
        out[h + "attn.c_proj.weight"] = sd[b + "attn.o_proj.weight"].t()
        out[h + "attn.c_proj.bias"] = sd[b + "attn.o_proj.bias"]
        out[h + "ln_2.weight"] = sd[b + "ln2.weight"]
        out[h + "ln_2.bias"] = sd[b + "ln2.bias"]
        out[h + "mlp.c_fc.weight"] = sd[b + "mlp.fc_in.weight"].t()
        out[h + "mlp.c_fc.bias"] = sd[b + "mlp.fc_in.bias"]
        out[h + "mlp.c_proj.weight"] = sd[b + "mlp.fc_out.weight"].t()
        out[h + "mlp.c_proj.bias"] = sd[b + "mlp.fc_out.bias"]
    out["ln_f.weight"] = sd["ln_f.weight"]
    out["ln_f.bias"] = sd["ln_f.bias"]
    return {k: v.contiguous() for k, v in out.items()}


def spec_state_dict(hf, cfg):
    """The inverse of hf_state_dict: GPT-2's tensors (names without the prefix) -> the spec's."""
    d = cfg.d_model
    out = {"tok_emb.weight": hf["wte.weight"], "pos_emb.weight": hf["wpe.weight"]}
    for i in range(cfg.n_layers):
        b, h = f"blocks.{i}.", f"h.{i}."
        out[b + "ln1.weight"] = hf[h + "ln_1.weight"]
        out[b + "ln1.bias"] = hf[h + "ln_1.bias"]
        w, bias = hf[h + "attn.c_attn.weight"], hf[h + "attn.c_attn.bias"]
        for j, p in enumerate("qkv"):
            out[b + f"attn.{p}_proj.weight"] = w[:, j * d : (j + 1) * d].t()
            out[b + f"attn.{p}_proj.bias"] = bias[j * d : (j + 1) * d]
        out[b + "attn.o_proj.weight"] = hf[h + "attn.c_proj.weight"].t()
        out[b + "attn.o_proj.bias"] = hf[h + "attn.c_proj.bias"]
        out[b + "ln2.weight"] = hf[h + "ln_2.weight"]
        out[b + "ln2.bias"] = hf[h + "ln_2.bias"]
        out[b + "mlp.fc_in.weight"] = hf[h + "mlp.c_fc.weight"].t()
        out[b + "mlp.fc_in.bias"] = hf[h + "mlp.c_fc.bias"]
        out[b + "mlp.fc_out.weight"] = hf[h + "mlp.c_proj.weight"].t()
        out[b + "mlp.fc_out.bias"] = hf[h + "mlp.c_proj.bias"]
    out["ln_f.weight"] = hf["ln_f.weight"]
    out["ln_f.bias"] = hf["ln_f.bias"]
    return {k: v.contiguous() for k, v in out.items()}


def _write_text(path, text):
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def save_hf_gpt2(model, folder, dtype=torch.float32, shards=1, prefix=PREFIX, extra=None, eos_id=None):
    """Write `model` as a Hugging Face GPT-2 folder: config.json and the weights in `dtype`
    (float32, float16 or bfloat16), in one model.safetensors or in `shards` files with an index.
    `extra`: more tensors to store as they are (e.g. "lm_head.weight", attention-mask buffers)."""
    os.makedirs(folder, exist_ok=True)
    _write_text(os.path.join(folder, "config.json"), json.dumps(config_dict(model.config, eos_id), indent=2) + "\n")
    tensors = {prefix + k: v.to(dtype) for k, v in hf_state_dict(model).items()}
    tensors.update(extra or {})
    names = list(tensors)
    if shards == 1:
        save_checkpoint(os.path.join(folder, "model.safetensors"), tensors, {"format": "pt"})
        return
    per = -(-len(names) // shards)
    weight_map, total = {}, 0
    for s in range(shards):
        file = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        part = {n: tensors[n] for n in names[s * per : (s + 1) * per]}
        save_checkpoint(os.path.join(folder, file), part, {"format": "pt"})
        for n, t in part.items():
            weight_map[n] = file
            total += t.numel() * t.element_size()
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    _write_text(os.path.join(folder, "model.safetensors.index.json"), json.dumps(index, indent=2) + "\n")


def _is_mask_buffer(name):
    parts = name.removeprefix(PREFIX).split(".")
    return len(parts) == 4 and parts[0] == "h" and parts[2] == "attn" and parts[3] in ("bias", "masked_bias")


def load_hf_gpt2(folder):
    """A TinyGPT from a Hugging Face GPT-2 folder (weights widened to float32)."""
    with open(os.path.join(folder, "config.json")) as f:
        cfg = config_from_dict(json.load(f), os.path.join(folder, "config.json"))
    single = os.path.join(folder, "model.safetensors")
    if os.path.exists(single):
        files = [single]
    else:
        with open(os.path.join(folder, "model.safetensors.index.json")) as f:
            files = [os.path.join(folder, s) for s in sorted(set(json.load(f)["weight_map"].values()))]
    hf = {}
    for path in files:
        state, _ = load_checkpoint(path, skip=_is_mask_buffer)
        for name, t in state.items():
            hf[name.removeprefix(PREFIX)] = t.float()
    head = hf.pop("lm_head.weight", None)
    if head is not None and not torch.equal(head, hf["wte.weight"]):
        raise ValueError(f"{folder}: lm_head.weight is not a copy of wte.weight")
    model = TinyGPT(cfg)
    model.load_state_dict(spec_state_dict(hf, cfg), strict=True)
    return model
