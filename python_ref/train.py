"""Train or continue training a TinyGPT in PyTorch, reading and writing the engine's checkpoints.

One process:
    /usr/bin/python3 -m python_ref.train --preset small --data tinyshakespeare.txt --steps 1500 --out small.tinygpt
    /usr/bin/python3 -m python_ref.train --init small.tinygpt --resume --data ... --steps 3000 --out small.tinygpt

Several processes (one machine or many), the way out for runs that outgrow one machine:
    torchrun --nproc_per_node 4 -m python_ref.train --preset xl --data ... --out xl.tinygpt
Each process draws its own batches; gradients are averaged by DistributedDataParallel
(gloo on CPU, nccl on CUDA). Rank 0 evaluates and writes the checkpoint.

The optimiser is the spec's: AdamW (0.9, 0.95), eps 1e-8, weight decay 0.1 on 2-D weights and
embeddings only, global gradient clipping at 1.0, warm-up + cosine schedule (or constant).
The batches are not the engine's batches bit for bit; the arithmetic is the same.
"""

import argparse
import hashlib
import os
import sys
import time

import torch
import torch.distributed as dist

from . import optim as opt
from .checkpoint import join_state, load_checkpoint, make_metadata, parse_json_field, save_checkpoint, split_state
from .dropout import key_of
from .model import TinyGPT, preset_config


# -- data ------------------------------------------------------------------------------------------


def load_corpus(path):
    """Byte tokens of a file, split contiguously: first 90% train, last 10% validation."""
    with open(path, "rb") as f:
        data = torch.frombuffer(bytearray(f.read()), dtype=torch.uint8).long()
    n_train = int(len(data) * 0.9)
    return data[:n_train], data[n_train:]


def get_batch(data, batch, ctx, gen):
    """B random windows of ctx+1 bytes: inputs are the first ctx, targets the last ctx."""
    starts = torch.randint(0, len(data) - ctx, (batch,), generator=gen)  # start + ctx + 1 <= len
    rows = torch.stack([data[s : s + ctx + 1] for s in starts.tolist()])
    return rows[:, :-1], rows[:, 1:]


@torch.no_grad()
def evaluate(model, val_data, batch, ctx, n_batches, device, seed=1234):
    """Mean loss over a fixed set of validation windows (fixed seed, so runs are comparable)."""
    model.eval()
    gen = torch.Generator().manual_seed(seed)
    losses = []
    for _ in range(n_batches):
        x, y = get_batch(val_data, batch, ctx, gen)
        _, loss = model(x.to(device), y.to(device))
        losses.append(loss.item())
    model.train()
    return sum(losses) / len(losses)


# -- distributed -----------------------------------------------------------------------------------


def setup_distributed():
    """(rank, world_size, device). Initialises torch.distributed when launched by torchrun."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return 0, 1, torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if torch.cuda.is_available():
        local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        torch.cuda.set_device(local_rank)
        dist.init_process_group(backend="nccl")
        device = torch.device("cuda", local_rank)
    else:
        dist.init_process_group(backend="gloo")
        device = torch.device("cpu")
    return dist.get_rank(), world, device


# -- main ------------------------------------------------------------------------------------------


def main(argv=None):
    ap = argparse.ArgumentParser(description="Train a TinyGPT in PyTorch (reads/writes .tinygpt)")
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--preset", help="start from scratch: tiny, small, medium, large, xl, huge, ...")
    src.add_argument("--init", help="start from the weights of this checkpoint")
    ap.add_argument(
        "--resume",
        action="store_true",
        help="with --init: also continue its optimizer state, step count and loss history, and its "
        "run's settings (batch, lr, schedule, ...) where not given here",
    )
    ap.add_argument("--data", required=True, help="text file (byte tokens)")
    ap.add_argument("--out", required=True, help="checkpoint to write")
    # None = not given: the default below, or on --resume the checkpoint run's own value.
    ap.add_argument(
        "--steps", type=int, default=None, help="total planned steps (the schedule spans these; default 1500)"
    )
    ap.add_argument("--batch", type=int, default=None, help="per-process batch (default: the preset's, else 16)")
    ap.add_argument("--lr", type=float, default=None, help="peak learning rate (default 3e-4)")
    ap.add_argument("--schedule", choices=["cosine", "constant"], default=None, help="default cosine")
    ap.add_argument("--warmup", type=int, default=None, help="-1 = automatic min(100, steps // 10) (the default)")
    ap.add_argument("--min-lr-frac", type=float, default=None, help="default 0.1")
    ap.add_argument("--weight-decay", type=float, default=None, help=f"default {opt.WEIGHT_DECAY}")
    ap.add_argument("--grad-clip", type=float, default=None, help=f"default {opt.GRAD_CLIP}")
    ap.add_argument("--seed", type=int, default=None, help="default 1337")
    ap.add_argument(
        "--dropout", type=float, default=None, help="dropout rate in [0, 1) (docs/model.md, Dropout; default 0)"
    )
    ap.add_argument("--eval-every", type=int, default=100, help="0 = only at the end")
    ap.add_argument("--eval-batches", type=int, default=8)
    ap.add_argument("--save-every", type=int, default=0, help="also write the checkpoint every N steps")
    args = ap.parse_args(argv)
    if args.resume and not args.init:
        ap.error("--resume continues a checkpoint: give it with --init")
    defaults = {
        "steps": 1500,
        "lr": 3e-4,
        "schedule": "cosine",
        "warmup": -1,
        "min_lr_frac": 0.1,
        "weight_decay": opt.WEIGHT_DECAY,
        "grad_clip": opt.GRAD_CLIP,
        "seed": 1337,
        "dropout": 0.0,
    }
    run_config = {}
    if args.resume:  # the run's own settings, where this command does not change them
        run_config = parse_json_field(load_checkpoint(args.init)[1], "train_config", {}) or {}
    for name, value in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, run_config.get(name, value))
    # The run's batch is per optimizer step (all processes together): split below by the process count.
    run_batch = int(run_config["batch"]) if args.batch is None and run_config.get("batch") else None
    check = [
        ("--steps", args.steps >= 1),
        ("--batch", args.batch is None or args.batch >= 1),
        ("--lr", args.lr > 0),
        ("--eval-batches", args.eval_batches >= 1),
        ("--eval-every", args.eval_every >= 0),
        ("--save-every", args.save_every >= 0),
        ("--grad-clip", args.grad_clip > 0),
        ("--dropout", 0.0 <= args.dropout < 1.0),
    ]
    need = {
        "--steps": "at least 1",
        "--batch": "at least 1",
        "--eval-batches": "at least 1",
        "--lr": "positive",
        "--grad-clip": "positive",
        "--eval-every": "at least 0",
        "--save-every": "at least 0",
        "--dropout": "at least 0 and below 1",
    }
    for name, ok in check:
        if not ok:
            ap.error(f"{name} must be {need[name]}, got {getattr(args, name[2:].replace('-', '_'))}")
    out_dir = os.path.dirname(os.path.abspath(args.out))
    if os.path.isdir(args.out) or not os.path.isdir(out_dir):
        ap.error(
            f"--out {args.out}: {'is a folder, not a file' if os.path.isdir(args.out) else 'its folder does not exist'}"
        )

    rank, world, device = setup_distributed()
    master = rank == 0
    torch.manual_seed(args.seed)

    # Model, and what the source checkpoint carries over.
    start_step, history, m, v, tokens_seen, elapsed = 0, [], {}, {}, 0, 0.0
    if args.preset:
        cfg, preset_batch = preset_config(args.preset)
        model = TinyGPT(cfg, dropout=args.dropout)  # spec initialisation, same on every rank (same seed)
    else:
        state, meta = load_checkpoint(args.init)
        model = TinyGPT.from_checkpoint(args.init, dropout=args.dropout)
        cfg, preset_batch = model.config, None
        if args.resume:
            _, m, v = split_state(state)
            train_state = parse_json_field(meta, "train_state", {}) or {}
            start_step = int(train_state.get("step", 0))
            tokens_seen = int(train_state.get("tokens_seen", 0))
            elapsed = float(train_state.get("elapsed_seconds", 0.0))
            history = parse_json_field(meta, "loss_history", []) or []
            if args.steps <= start_step:
                raise ValueError(
                    f"{args.init} is at step {start_step}; --steps (the run's total) must be above it, got {args.steps}"
                )
    batch = (max(1, run_batch // world) if run_batch else None) or args.batch or preset_batch or 16
    model.to(device)

    optimizer = opt.make_optimizer(model, lr=args.lr, weight_decay=args.weight_decay)
    if m:
        opt.import_moments(model, optimizer, m, v, start_step)

    ddp_model = model
    if world > 1:
        ddp_model = torch.nn.parallel.DistributedDataParallel(
            model, device_ids=[device.index] if device.type == "cuda" else None
        )

    train_data, val_data = load_corpus(args.data)
    # Checked before the first step, so that no training is lost to a split too small to evaluate.
    for part, data in (("training", train_data), ("validation", val_data)):
        if len(data) < cfg.ctx + 1:
            raise ValueError(
                f"{args.data}: corpus too small: its {part} split has {len(data)} bytes, fewer than one "
                f"window of {cfg.ctx + 1} bytes for a context of {cfg.ctx}"
            )
    # Each rank draws its own windows; seeded by rank and starting step so a resumed run goes on.
    gen = torch.Generator().manual_seed(args.seed + 1_000_003 * rank + start_step)

    train_config = {
        "batch": batch * world,
        "steps": args.steps,
        "lr": args.lr,
        "schedule": args.schedule,
        "warmup": args.warmup,
        "min_lr_frac": args.min_lr_frac,
        "beta1": opt.BETAS[0],
        "beta2": opt.BETAS[1],
        "eps": opt.EPS,
        "weight_decay": args.weight_decay,
        "grad_clip": args.grad_clip,
        "dropout": args.dropout,
        "seed": args.seed,
        "eval_every": args.eval_every,
        "eval_batches": args.eval_batches,
        "sample_every": 0,
        "data_path": os.path.abspath(args.data),
    }

    t0 = time.time()

    def save(step):
        if not master:
            return
        m_now, v_now, _ = opt.export_moments(model, optimizer)
        weights = {k: t for k, t in model.state_dict().items()}
        # data_rng: 16 hex digits as the format asks; PyTorch's generator state does not fit in
        # 64 bits, so this is a digest of it (the engine resumes with its own batch stream).
        data_rng = hashlib.blake2b(gen.get_state().numpy().tobytes(), digest_size=8).hexdigest()
        train_state = {
            "step": step,
            "data_rng": data_rng,
            "tokens_seen": tokens_seen,
            "elapsed_seconds": elapsed + time.time() - t0,
        }
        # The whole curve (a point at each validation); the engine thins a history to its
        # bound when it continues the run (engine/training_loop.h).
        meta = make_metadata(
            cfg.to_dict(),
            train_config=train_config,
            train_state=train_state,
            loss_history=history,
            created_by=f"python_ref (torch {torch.__version__})",
        )
        save_checkpoint(args.out, join_state(weights, m_now, v_now), meta)

    if master:
        print(
            f"model: {cfg} ({model.num_params():,} params), batch {batch} x {world} process(es), "
            f"steps {start_step}..{args.steps}, device {device}"
        )

    dropout_key = key_of(args.seed)
    model.train()
    for step in range(start_step, args.steps):
        lr = opt.lr_at(step, args.steps, args.lr, args.schedule, args.warmup, args.min_lr_frac)
        opt.set_lr(optimizer, lr)

        x, y = get_batch(train_data, batch, cfg.ctx, gen)
        # The engine's masks for this step (every rank draws the same ones, on its own batch).
        _, loss = ddp_model(x.to(device), y.to(device), dropout_seed=(dropout_key, step + 1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()  # DDP averages the gradients across ranks here
        grad_norm = opt.clip_gradients(model, args.grad_clip)
        optimizer.step()
        tokens_seen += batch * cfg.ctx * world

        last = step + 1 == args.steps
        if master and (last or (args.eval_every and (step + 1) % args.eval_every == 0)):
            val = evaluate(model, val_data, batch, cfg.ctx, args.eval_batches, device)
            history.append([step + 1, loss.item(), val])  # [step, train_loss, val_loss]
            print(
                f"step {step + 1:6d} | loss {loss.item():.4f} | val {val:.4f} | lr {lr:.2e} "
                f"| grad norm {grad_norm:.3f} | {time.time() - t0:.1f}s",
                flush=True,
            )
        if args.save_every and (step + 1) % args.save_every == 0 and not last:
            save(step + 1)

    save(max(args.steps, start_step))
    if master:
        print(f"wrote {args.out}")
    if world > 1:
        dist.destroy_process_group()


def cli(argv=None):
    """main() for the command line: a bad file or setting is one line on stderr, not a traceback."""
    try:
        main(argv)
    except (OSError, ValueError) as e:
        sys.exit(f"python_ref.train: error: {e}")


if __name__ == "__main__":
    cli()
