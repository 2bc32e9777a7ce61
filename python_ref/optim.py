"""AdamW, gradient clipping and the learning-rate schedule, as the spec and the engine define them."""

import math

import torch

BETAS = (0.9, 0.95)
EPS = 1e-8
WEIGHT_DECAY = 0.1
GRAD_CLIP = 1.0


def param_groups(model, weight_decay=WEIGHT_DECAY):
    """Decay on 2-D tensors (Linear weights and both embeddings); none on biases and LayerNorm."""
    decay, no_decay = [], []
    for _, p in model.named_parameters():
        if not p.requires_grad:
            continue
        (decay if p.dim() == 2 else no_decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def make_optimizer(model, lr=3e-4, betas=BETAS, eps=EPS, weight_decay=WEIGHT_DECAY):
    return torch.optim.AdamW(param_groups(model, weight_decay), lr=lr, betas=tuple(betas), eps=eps, foreach=False)


def set_lr(optimizer, lr):
    for group in optimizer.param_groups:
        group["lr"] = lr


def warmup_steps(steps, warmup=-1):
    """Warm-up length: as given, or automatic (-1 / None) min(100, steps // 10)."""
    if warmup is None or warmup < 0:
        return min(100, steps // 10)
    return warmup


def lr_at(step, steps, lr, schedule="cosine", warmup=-1, min_lr_frac=0.1):
    """Learning rate of 0-based step `step` of a run planned for `steps` steps (equals the engine's)."""
    if schedule == "constant":
        return lr
    if schedule != "cosine":
        raise ValueError(f"unknown schedule {schedule!r} (cosine | constant)")
    W = warmup_steps(steps, warmup)
    if step < W:
        return lr * (step + 1) / W
    progress = (step - W) / max(1, steps - W)
    lr_min = min_lr_frac * lr
    return lr_min + 0.5 * (lr - lr_min) * (1.0 + math.cos(math.pi * progress))


def clip_gradients(model, max_norm=GRAD_CLIP):
    """Global-norm clipping; returns the norm before clipping (as a float)."""
    return float(torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm))


# -- optimizer state <-> checkpoint tensors (optim.m.<name>, optim.v.<name>) ---------------------


def export_moments(model, optimizer):
    """(m, v, step): dicts keyed by parameter name; empty when no step has been taken."""
    m, v, step = {}, {}, 0
    for name, p in model.named_parameters():
        st = optimizer.state.get(p)
        if st:
            m[name] = st["exp_avg"].detach().clone()
            v[name] = st["exp_avg_sq"].detach().clone()
            step = int(st["step"])
    return m, v, step


def import_moments(model, optimizer, m, v, step):
    """Load AdamW moments saved by export_moments (or by the engine) into `optimizer`."""
    if not m:
        return
    for name, p in model.named_parameters():
        if name not in m or name not in v:
            raise KeyError(f"optimizer state is missing {name}")
        optimizer.state[p] = {
            "step": torch.tensor(float(step)),
            "exp_avg": m[name].clone().to(p.device, p.dtype),
            "exp_avg_sq": v[name].clone().to(p.device, p.dtype),
        }
