"""LoRA for TinyGPT, as the spec's "LoRA" section and the engine define it.

For a frozen base Linear W [out, in]:  y = W x + b + (alpha / r) * B (A x), with A [r, in]
Kaiming-uniform (a = sqrt 5, as nn.Linear's weight) and B [out, r] zero, so step 0 is the base.
`LoRALinear` is an nn.Linear with two extra parameters, so the state_dict names are the engine's
(`blocks.0.attn.q_proj.weight`, `.bias`, `.lora_A`, `.lora_B`).

    model = TinyGPT.from_checkpoint("base.tinygpt")
    apply_lora(model, rank=4, alpha=8, targets=("q", "v"))      # freezes the base
    load_adapter(model, "adapter.tinygpt-lora")                 # or train model.lora_parameters()
    merge_lora(model)                                           # W += (alpha / r) B A, plain Linear again

The target "qkv" is GPT-2's fused c_attn adapter, as PEFT builds it: one A [r, d] over the
attention's input and one B [3d, r] whose (alpha / r) (x A^T) B^T is the update of q, k and v
side by side (`QKVLoRA`, `blocks.0.attn.qkv.lora_A`, `.lora_B`). The engine keeps B as its three
row blocks (`blocks.0.attn.qkv.q.lora_B`, `.k.`, `.v.`): adapter files hold those
(`split_qkv`, `fuse_qkv`).

Adapter files are safetensors with only the lora_A / lora_B tensors and metadata (format
"tinygpt-lora", base_sha256, model_config, lora_config, ...): docs/post-training.md.
"""

import hashlib
import json
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from .checkpoint import load_checkpoint, save_checkpoint
from .dropout import drop

ADAPTER_FORMAT = "tinygpt-lora"
ADAPTER_VERSION = "1"
TARGETS = ("q", "k", "v", "qkv", "o", "fc_in", "fc_out")
_MODULES = {
    "q": "attn.q_proj",
    "k": "attn.k_proj",
    "v": "attn.v_proj",
    "o": "attn.o_proj",
    "fc_in": "mlp.fc_in",
    "fc_out": "mlp.fc_out",
}


class _Factors:
    """The low-rank factors of an adapter, A [r, in] and B [out, r] (B starts at zero), and its
    update (alpha / r) (x A^T) B^T, with dropout on the adapter's input only (as PEFT): stream
    "<name>.lora_drop"."""

    def _add_factors(self, in_features, out_features, rank, alpha, dropout, name, ctx):
        self.rank, self.alpha = rank, float(alpha)
        self.lora_dropout, self.drop_name, self.drop_ctx = dropout, name + ".lora_drop", ctx
        self.lora_A = nn.Parameter(torch.empty(rank, in_features))
        self.lora_B = nn.Parameter(torch.zeros(out_features, rank))
        nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))

    @property
    def scale(self):
        return self.alpha / self.rank

    def low_rank(self, x):
        xa = drop(x, self.lora_dropout, self.drop_name, self.drop_ctx, self.training)
        return self.scale * F.linear(F.linear(xa, self.lora_A), self.lora_B)

    def delta_weight(self):
        return self.scale * (self.lora_B @ self.lora_A)


class LoRALinear(_Factors, nn.Linear):
    """nn.Linear plus a low-rank update: x W^T + b + (alpha / r) (x A^T) B^T."""

    def __init__(self, base: nn.Linear, rank: int, alpha: float, dropout=0.0, name="", ctx=None):
        nn.Linear.__init__(self, base.in_features, base.out_features, bias=base.bias is not None)
        if rank < 1 or rank > min(base.in_features, base.out_features):
            raise ValueError(f"LoRA rank {rank} does not fit a layer [{base.out_features}, {base.in_features}]")
        self.weight = base.weight  # the same Parameter objects: the base stays shared
        self.bias = base.bias
        self._add_factors(base.in_features, base.out_features, rank, alpha, dropout, name, ctx)

    def forward(self, x):
        return F.linear(x, self.weight, self.bias) + self.low_rank(x)


class QKVLoRA(_Factors, nn.Module):
    """GPT-2's fused c_attn adapter: (alpha / r) (x A^T) B^T, A [r, d], B [3d, r], the [.., 3d]
    update of q, k and v concatenated (the attention adds its three slices); delta_weight() is
    [3d, d]: q's rows, k's, v's."""

    def __init__(self, d, rank, alpha, dropout=0.0, name="", ctx=None):
        nn.Module.__init__(self)
        if rank < 1 or rank > d:
            raise ValueError(f"LoRA rank {rank} does not fit a layer [{3 * d}, {d}]")
        self.d = d
        self._add_factors(d, 3 * d, rank, alpha, dropout, name, ctx)

    def forward(self, x):
        return self.low_rank(x)


def split_qkv(state):
    """The engine's names: each fused "...attn.qkv.lora_B" [3d, r] as its q, k, v row blocks."""
    out = {}
    for n, t in state.items():
        if n.endswith(".attn.qkv.lora_B"):
            for part, block in zip("qkv", t.chunk(3, dim=0)):
                out[n[: -len("lora_B")] + part + ".lora_B"] = block.contiguous()
        else:
            out[n] = t
    return out


def fuse_qkv(state):
    """The reverse of split_qkv: the engine's three row blocks as one "...attn.qkv.lora_B"."""
    out = {n: t for n, t in state.items() if not any(n.endswith(f".attn.qkv.{p}.lora_B") for p in "qkv")}
    for n in state:
        if n.endswith(".attn.qkv.q.lora_B"):
            pre = n[: -len("q.lora_B")]
            out[pre + "lora_B"] = torch.cat([state[pre + p + ".lora_B"] for p in "qkv"], dim=0)
    return out


def _parent_and_name(model, path):
    *parents, name = path.split(".")
    m = model
    for p in parents:
        m = getattr(m, p)
    return m, name


def apply_lora(model, rank=4, alpha=8.0, targets=("q", "v"), dropout=0.0):
    """Replace the target projections of every block by LoRALinear and freeze everything else;
    `dropout` is the rate on the adapters' input in training (off in eval mode and without a
    dropout_seed). Returns the list of adapter parameters (the only ones with requires_grad)."""
    if not 0.0 <= dropout < 1.0:
        raise ValueError(f"LoRA dropout must be at least 0 and below 1, got {dropout}")
    unknown = set(targets) - set(TARGETS)
    if unknown:
        raise ValueError(f"unknown LoRA targets {sorted(unknown)} (choose from {', '.join(TARGETS)})")
    if "qkv" in targets and set(targets) & {"q", "k", "v"}:
        raise ValueError("LoRA target qkv adapts q, k and v together: not with q, k or v")
    for p in model.parameters():
        p.requires_grad_(False)
    for i, block in enumerate(model.blocks):
        for t in TARGETS:  # the engine's order
            if t not in targets:
                continue
            if t == "qkv":
                prefix = f"blocks.{i}.attn.qkv"
                block.attn.qkv = QKVLoRA(model.config.d_model, rank, alpha, dropout, prefix, model.drop_ctx)
                continue
            parent, name = _parent_and_name(block, _MODULES[t])
            prefix = f"blocks.{i}.{_MODULES[t]}"
            setattr(parent, name, LoRALinear(getattr(parent, name), rank, alpha, dropout, prefix, model.drop_ctx))
    model.lora_config = {
        "rank": rank,
        "alpha": float(alpha),
        "targets": [t for t in TARGETS if t in targets],
        "dropout": float(dropout),
    }
    return lora_parameters(model)


def lora_parameters(model):
    return [p for n, p in model.named_parameters() if n.endswith(".lora_A") or n.endswith(".lora_B")]


def lora_state_dict(model):
    """The adapter tensors under the engine's names (the fused qkv B split: split_qkv)."""
    return split_qkv(
        {n: p.detach().clone() for n, p in model.named_parameters() if n.endswith(".lora_A") or n.endswith(".lora_B")}
    )


def merge_lora(model):
    """Fold every adapter into its base weight and turn the layers back into plain nn.Linear."""
    for block in model.blocks:
        fused = block.attn._modules.get("qkv")
        if fused is not None:
            with torch.no_grad():
                for proj, delta in zip(
                    (block.attn.q_proj, block.attn.k_proj, block.attn.v_proj), fused.delta_weight().chunk(3, dim=0)
                ):
                    proj.weight += delta
            del block.attn.qkv
        for t in TARGETS:
            if t == "qkv":
                continue
            parent, name = _parent_and_name(block, _MODULES[t])
            layer = getattr(parent, name)
            if isinstance(layer, LoRALinear):
                plain = nn.Linear(layer.in_features, layer.out_features, bias=layer.bias is not None)
                with torch.no_grad():
                    plain.weight.copy_(layer.weight + layer.delta_weight())
                    if layer.bias is not None:
                        plain.bias.copy_(layer.bias)
                setattr(parent, name, plain)
    return model


def sha256_file(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def weights_sha256(state):
    """The engine's identity of a model's weights (engine/lora.h, weights_sha256): sha256 of the
    lines "<name> <sha256 of its float32 values, little-endian>\\n" of every base parameter (no
    optimizer state, no adapters), in name order."""
    lines = ""
    for name in sorted(n for n in state if not n.startswith("optim.") and ".lora_" not in n):
        data = state[name].detach().to(torch.float32).contiguous().numpy().astype("<f4").tobytes()
        lines += f"{name} {hashlib.sha256(data).hexdigest()}\n"
    return hashlib.sha256(lines.encode("utf-8")).hexdigest()


def load_adapter(model, path, base_path=None):
    """Apply an adapter file to a TinyGPT (built from its base checkpoint). With base_path, the
    adapter must have been trained on that base: the same weights (base_weights_sha256), or for
    an adapter that records only its base's file, the same file (base_sha256)."""
    state, meta = load_checkpoint(path)
    if meta.get("format") != ADAPTER_FORMAT or meta.get("format_version") != ADAPTER_VERSION:
        raise ValueError(f"{path}: not a tinygpt-lora {ADAPTER_VERSION} adapter")
    mc = json.loads(meta["model_config"])
    if any(int(mc[k]) != getattr(model.config, k) for k in ("vocab_size", "n_layers", "d_model", "n_heads", "ctx")):
        raise ValueError(f"{path}: the adapter was trained on a base with config {mc}, not {model.config}")
    if base_path is not None:
        base_tok = json.loads(load_checkpoint(base_path)[1].get("tokenizer", '{"type": "byte", "vocab_size": 256}'))
        if json.loads(meta.get("tokenizer", '{"type": "byte", "vocab_size": 256}')) != base_tok:
            raise ValueError(f"{path}: the adapter was trained on a base with another tokenizer")
        if "base_weights_sha256" in meta:
            if weights_sha256(load_checkpoint(base_path)[0]) != meta["base_weights_sha256"]:
                raise ValueError(f"{path}: the adapter was trained on a base with other weights")
        elif sha256_file(base_path) != meta.get("base_sha256"):
            raise ValueError(f"{path}: the adapter was trained on a different base checkpoint")
    lc = json.loads(meta["lora_config"])
    apply_lora(model, lc["rank"], lc["alpha"], lc["targets"], lc.get("dropout", 0.0))
    missing = model.load_state_dict(fuse_qkv(state), strict=False)
    if missing.unexpected_keys:
        raise ValueError(f"{path}: unexpected tensors {missing.unexpected_keys}")
    absent = [k for k in missing.missing_keys if k.endswith(".lora_A") or k.endswith(".lora_B")]
    if absent:
        raise ValueError(f"{path}: missing adapter tensors {absent}")
    return model


def save_adapter(model, path, base_path, extra_metadata=None):
    """Write the model's adapters as a tinygpt-lora file tied to the base checkpoint `base_path`."""
    meta = {
        "format": ADAPTER_FORMAT,
        "format_version": ADAPTER_VERSION,
        "base_sha256": sha256_file(base_path),
        "base_weights_sha256": weights_sha256(load_checkpoint(base_path)[0]),
        "model_config": json.dumps(model.config.to_dict()),
        # The base's tokenizer identity (its "tokenizer" metadata; the tokenizer.json stays in the base).
        "tokenizer": load_checkpoint(base_path)[1].get("tokenizer", json.dumps({"type": "byte", "vocab_size": 256})),
        "lora_config": json.dumps({**model.lora_config, "weight_decay": 0.0}),
        "created_by": "python_ref",
    }
    meta.update(extra_metadata or {})
    save_checkpoint(path, lora_state_dict(model), meta)
