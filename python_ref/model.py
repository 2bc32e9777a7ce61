"""TinyGPT in PyTorch: the numerical oracle for the C++ engine.

Exactly the model of docs/model.md: GPT-2 style, pre-LayerNorm, learned absolute
positions, weight-tied output, the exact (erf) GELU or GPT-2's tanh form (GPTConfig.gelu). The
state_dict names are the names on disk, so a checkpoint written by the engine loads with
load_state_dict directly.

Dropout (TinyGPT(cfg, dropout=p), off by default) is the spec's: the same sites and the same
counter-based masks as the engine (python_ref/dropout.py), so a training step with dropout
matches the engine's. It applies only in training mode and only to a forward given the step's
dropout_seed = (key, step); evaluation and generation never drop.
"""

import json
import math
from dataclasses import asdict, dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from .checkpoint import load_checkpoint, model_weights, parse_json_field
from .dropout import DropoutContext, drop
from .tokenizer import CheckpointTokenizer


@dataclass
class GPTConfig:
    vocab_size: int = 256
    n_layers: int = 3
    d_model: int = 96
    n_heads: int = 3
    ctx: int = 64
    gelu: str = "erf"  # "erf" (exact) or "tanh" (GPT-2's gelu_new)

    def __post_init__(self):
        if self.gelu not in ("erf", "tanh"):
            raise ValueError(f'gelu must be "erf" or "tanh", got {self.gelu!r}')

    @property
    def head_dim(self):
        return self.d_model // self.n_heads

    def to_dict(self):
        """The model_config of a checkpoint: gelu only when it is not the default (as the engine writes it)."""
        d = asdict(self)
        if d["gelu"] == "erf":
            del d["gelu"]
        return d


# The spec's preset table: name -> (layers, d, heads, ctx, batch). Parameter counts are exact.
PRESETS = {
    "tiny": dict(n_layers=2, d_model=48, n_heads=3, ctx=32, batch=16),  # 70,464
    "small": dict(n_layers=3, d_model=96, n_heads=3, ctx=64, batch=16),  # 366,432
    "medium": dict(n_layers=4, d_model=128, n_heads=4, ctx=96, batch=16),  # 838,400
    "large": dict(n_layers=6, d_model=192, n_heads=6, ctx=128, batch=12),  # 2,743,296
    "xl": dict(n_layers=8, d_model=256, n_heads=8, ctx=128, batch=8),  # 6,416,896
    "huge": dict(n_layers=12, d_model=256, n_heads=8, ctx=256, batch=8),  # 9,608,704
    "massive": dict(n_layers=14, d_model=384, n_heads=12, ctx=256, batch=4),  # 25,039,872
    "mega": dict(n_layers=14, d_model=384, n_heads=12, ctx=512, batch=2),  # 25,138,176
    "behemoth": dict(n_layers=24, d_model=1280, n_heads=20, ctx=512, batch=1),  # 473,244,160
}


def preset_config(name):
    """(GPTConfig, batch) of a preset, by case-insensitive name."""
    if name.lower() not in PRESETS:
        raise ValueError(f"unknown preset '{name}' (choose one of: {', '.join(PRESETS)})")
    p = PRESETS[name.lower()]
    cfg = GPTConfig(n_layers=p["n_layers"], d_model=p["d_model"], n_heads=p["n_heads"], ctx=p["ctx"])
    return cfg, p["batch"]


def param_count(cfg):
    """The spec's closed form: V*d + T*d + 2d + L*(12 d^2 + 13 d)."""
    V, T, d, L = cfg.vocab_size, cfg.ctx, cfg.d_model, cfg.n_layers
    return V * d + T * d + 2 * d + L * (12 * d * d + 13 * d)


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg, layer=0, dropout=0.0, ctx=None):
        super().__init__()
        assert cfg.d_model % cfg.n_heads == 0
        self.n_heads = cfg.n_heads
        self.layer, self.dropout, self.drop_ctx = layer, dropout, ctx
        self.q_proj = nn.Linear(cfg.d_model, cfg.d_model)
        self.k_proj = nn.Linear(cfg.d_model, cfg.d_model)
        self.v_proj = nn.Linear(cfg.d_model, cfg.d_model)
        self.o_proj = nn.Linear(cfg.d_model, cfg.d_model)

    def forward(self, x):
        B, T, C = x.shape
        hs = C // self.n_heads
        # [B, T, C] -> [B, heads, T, hs]
        q, k, v = self.q_proj(x), self.k_proj(x), self.v_proj(x)
        fused = self._modules.get("qkv")  # GPT-2's c_attn LoRA adapter (python_ref/lora.py), when applied
        if fused is not None:
            dq, dk, dv = fused(x).split(C, dim=-1)
            q, k, v = q + dq, k + dk, v + dv
        q = q.view(B, T, self.n_heads, hs).transpose(1, 2)
        k = k.view(B, T, self.n_heads, hs).transpose(1, 2)
        v = v.view(B, T, self.n_heads, hs).transpose(1, 2)
        # Explicit attention in fp32: softmax(q k^T / sqrt(hs)) with the causal mask, then @ v.
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
        causal = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()  # key j <= query i
        att = att.masked_fill(~causal, float("-inf"))
        att = F.softmax(att.float(), dim=-1)
        # Dropout on the probabilities, element ((b*H + h)*T + i)*T + j of [B, heads, T, T].
        att = drop(att, self.dropout, f"blocks.{self.layer}.attn.probs.drop", self.drop_ctx, self.training)
        y = att @ v  # [B, heads, T, hs]
        y = y.transpose(1, 2).contiguous().view(B, T, C)  # heads side by side again
        return drop(self.o_proj(y), self.dropout, f"blocks.{self.layer}.attn.drop", self.drop_ctx, self.training)


class MLP(nn.Module):
    def __init__(self, cfg, layer=0, dropout=0.0, ctx=None):
        super().__init__()
        self.layer, self.dropout, self.drop_ctx = layer, dropout, ctx
        self.fc_in = nn.Linear(cfg.d_model, 4 * cfg.d_model)
        # exact: 0.5 x (1 + erf(x / sqrt 2)); tanh: 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))
        self.gelu = nn.GELU(approximate="tanh" if cfg.gelu == "tanh" else "none")
        self.fc_out = nn.Linear(4 * cfg.d_model, cfg.d_model)

    def forward(self, x):
        y = self.fc_out(self.gelu(self.fc_in(x)))
        return drop(y, self.dropout, f"blocks.{self.layer}.mlp.drop", self.drop_ctx, self.training)


class Block(nn.Module):
    def __init__(self, cfg, layer=0, dropout=0.0, ctx=None):
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.d_model, eps=1e-5)
        self.attn = CausalSelfAttention(cfg, layer, dropout, ctx)
        self.ln2 = nn.LayerNorm(cfg.d_model, eps=1e-5)
        self.mlp = MLP(cfg, layer, dropout, ctx)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        x = x + self.mlp(self.ln2(x))
        return x


class TinyGPT(nn.Module):
    def __init__(self, cfg, dropout=0.0):
        super().__init__()
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be at least 0 and below 1, got {dropout}")
        self.config = cfg
        self.dropout = dropout
        # The (key, step) of the forward being run, read by every dropout site (LoRA's too).
        self.drop_ctx = DropoutContext()
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.pos_emb = nn.Embedding(cfg.ctx, cfg.d_model)
        self.blocks = nn.ModuleList([Block(cfg, i, dropout, self.drop_ctx) for i in range(cfg.n_layers)])
        self.ln_f = nn.LayerNorm(cfg.d_model, eps=1e-5)
        self.reset_parameters()

    def reset_parameters(self):
        """The spec's initialisation (for training from scratch; not bitwise the engine's RNG)."""
        residual_std = 0.02 / math.sqrt(2 * self.config.n_layers)
        for name, p in self.named_parameters():
            if name.endswith("o_proj.weight") or name.endswith("fc_out.weight"):
                nn.init.normal_(p, mean=0.0, std=residual_std)
            elif p.dim() == 2:  # Linear weights and both embeddings
                nn.init.normal_(p, mean=0.0, std=0.02)
            elif ".ln" in name or name.startswith("ln_f"):
                if name.endswith("weight"):
                    nn.init.ones_(p)
                else:
                    nn.init.zeros_(p)
            else:  # Linear biases
                nn.init.zeros_(p)

    def num_params(self):
        return sum(p.numel() for p in self.parameters())

    def forward(self, idx, targets=None, mask=None, dropout_seed=None):
        """idx, targets: [B, T] int64 token ids below vocab_size (bytes for the presets' 256); mask: optional [B, T] weights (SFT);
        dropout_seed: (key, step) of a training step (python_ref.dropout.key_of(seed), the 1-based
        step), which turns dropout on in training mode. Returns (logits [B, T, V], loss or None)."""
        B, T = idx.shape
        assert T <= self.config.ctx, f"sequence length {T} exceeds the context {self.config.ctx}"
        self.drop_ctx.seed = dropout_seed
        try:
            pos = torch.arange(T, device=idx.device)
            x = drop(self.tok_emb(idx) + self.pos_emb(pos), self.dropout, "emb.drop", self.drop_ctx, self.training)
            for block in self.blocks:
                x = block(x)
        finally:
            self.drop_ctx.seed = None
        x = self.ln_f(x)
        # Weight tying: no separate head. The whole [B, T, V] logits and the plain cross-entropy,
        # where the engine's loss programs compute both in chunks of the vocabulary: the oracle
        # stays the obvious computation.
        logits = x @ self.tok_emb.weight.t()

        loss = None
        if targets is not None:
            nll = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1), reduction="none")
            if mask is None:
                loss = nll.mean()
            else:
                m = mask.reshape(-1).to(nll.dtype)
                loss = (m * nll).sum() / m.sum()
        return logits, loss

    # -- checkpoints ---------------------------------------------------------------------------

    @classmethod
    def from_checkpoint(cls, path, return_metadata=False, dropout=0.0):
        """Build the model a checkpoint describes and load its weights (optimizer state ignored);
        `dropout` is the rate of the training to come (the checkpoint's train config records a run's)."""
        state, meta = load_checkpoint(path)
        if meta.get("format", "tinygpt") != "tinygpt" or meta.get("format_version", "1") != "1":
            raise ValueError(
                f"{path}: format {meta.get('format')!r} version {meta.get('format_version')!r} "
                "is not one python_ref reads (tinygpt 1)"
            )
        mc = parse_json_field(meta, "model_config")
        if mc is None:
            raise ValueError(f"{path}: no model_config in the metadata")
        # The model computes on ids whatever its tokenizer (bytes or BPE); the tokenizer is checked
        # here and decodes with python_ref.tokenizer.CheckpointTokenizer(meta).
        try:
            tok = CheckpointTokenizer(meta)
        except ValueError as e:
            raise ValueError(f"{path}: {e}") from None
        if tok.vocab_size != int(mc["vocab_size"]):
            raise ValueError(
                f"{path}: the tokenizer has {tok.vocab_size} tokens but the model's vocab_size is {mc['vocab_size']}"
            )
        cfg = GPTConfig(
            **{k: int(mc[k]) for k in ("vocab_size", "n_layers", "d_model", "n_heads", "ctx")},
            gelu=mc.get("gelu", "erf"),
        )
        model = cls(cfg, dropout)
        model.load_state_dict(model_weights(state), strict=True)
        return (model, meta) if return_metadata else model

    def config_json(self):
        return json.dumps(self.config.to_dict())
