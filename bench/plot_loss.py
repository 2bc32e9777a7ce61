#!/usr/bin/python3
"""Loss curves as pictures for the docs.

    /usr/bin/python3 bench/plot_loss.py run METRICS.jsonl [--title T] --out docs/img/X.svg
        a training run's metrics.jsonl (ptl train, ptl-webgpu-train): the training loss (its
        moving average over 50 steps, and every step faintly) and the validation loss by step.
    /usr/bin/python3 bench/plot_loss.py time FILE.jsonl [FILE.jsonl ...] --out docs/img/X.svg
        bench/time_to_loss results: validation loss against training seconds, one line per
        backend (the "curve" lines), with the targets the runs reached marked.
    /usr/bin/python3 bench/plot_loss.py bpb FILE.jsonl --out docs/img/X.svg
        bench/tokenizer_learning results: validation bits per byte against training seconds, one
        line per tokenizer, each run's final whole-split figure marked.

Needs matplotlib (Debian: apt-get install python3-matplotlib).
"""

import argparse
import json
import sys

try:  # only the plotting needs it: --help and a clear message work without
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: E402
except ImportError:
    plt = None


def read_jsonl(path):
    rows = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError:
                    pass  # a line cut off by a stopped run
    return rows


def plot_run(a):
    rows = read_jsonl(a.inputs[0])
    steps = [m["step"] for m in rows if "train_loss" in m]
    train = [m["train_loss"] for m in rows if "train_loss" in m]
    val = [(m["step"], m["val_loss"]) for m in rows if "val_loss" in m]
    if not steps:
        sys.exit(f"bench/plot_loss.py: no training steps in {a.inputs[0]}")
    avg, window, acc = [], [], 0.0
    for x in train:  # trailing moving average: the per-step loss is noisy at batch 64
        window.append(x)
        acc += x
        if len(window) > 50:
            acc -= window.pop(0)
        avg.append(acc / len(window))
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(steps, train, color="tab:blue", alpha=0.15, linewidth=0.6)
    ax.plot(steps, avg, color="tab:blue", label="training loss (mean of 50 steps)")
    if val:
        ax.plot([s for s, _ in val], [v for _, v in val], "o-", color="tab:orange", label="validation loss")
        best = min(val, key=lambda p: p[1])
        ax.annotate(f"{best[1]:.4f} at step {best[0]}", best, textcoords="offset points", xytext=(-10, 12))
    ax.set_xlabel("step")
    ax.set_ylabel("loss (nats per byte)")
    ax.set_ylim(bottom=min(min(train), min((v for _, v in val), default=9)) - 0.05, top=min(max(train), 3.0))
    ax.grid(alpha=0.3)
    ax.legend()
    ax.set_title(a.title or a.inputs[0])
    fig.tight_layout()
    fig.savefig(a.out)


def plot_time(a):
    fig, ax = plt.subplots(figsize=(7, 4))
    targets = set()
    for path in a.inputs:
        rows = read_jsonl(path)
        for r in rows:
            if r.get("kind") == "curve" and r["points"]:
                pts = r["points"]
                label = f"{r['backend']} ({r['preset']})"
                ax.plot([p[0] for p in pts], [p[2] for p in pts], "o-", markersize=3, label=label)
            elif "target_loss" in r and r.get("seconds") is not None:
                targets.add(r["target_loss"])
                ax.plot([r["seconds"]], [r["val_loss"]], "k+", markersize=9)
    for t in sorted(targets):
        ax.axhline(t, color="gray", linestyle=":", linewidth=0.8)
    ax.set_xscale("log")
    ax.set_xlabel("training seconds (log scale; validation, sampling and saving left out)")
    ax.set_ylabel("validation loss (nats per byte)")
    ax.set_ylim(top=2.6)
    ax.grid(alpha=0.3, which="both")
    ax.legend()
    ax.set_title(a.title or "Validation loss against training time")
    fig.tight_layout()
    fig.savefig(a.out)


def plot_bpb(a):
    fig, ax = plt.subplots(figsize=(7, 4))
    for path in a.inputs:
        rows = read_jsonl(path)
        finals = {(r["tokenizer"], r["vocab_size"]): r for r in rows if r.get("kind") == "result"}
        for r in rows:
            if r.get("kind") != "curve" or not r["points"]:
                continue
            pts = [p for p in r["points"] if p[3] is not None]
            label = "bytes" if r["tokenizer"] == "bytes" else f"BPE {r['vocab_size']}"
            (line,) = ax.plot([p[0] for p in pts], [p[3] for p in pts], "o-", markersize=3, label=label)
            f = finals.get((r["tokenizer"], r["vocab_size"]))
            if f and f.get("final_val_bits_per_byte") is not None:
                ax.plot([f["train_s"]], [f["final_val_bits_per_byte"]], "*", markersize=10, color=line.get_color())
    ax.set_xlabel("training seconds (validation left out)")
    ax.set_ylabel("validation bits per byte")
    ax.grid(alpha=0.3)
    ax.legend()
    ax.set_title(a.title or "Bits per byte against training time (star: whole validation split)")
    fig.tight_layout()
    fig.savefig(a.out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["run", "time", "bpb"])
    ap.add_argument("inputs", nargs="+")
    ap.add_argument("--out", required=True)
    ap.add_argument("--title", default=None)
    a = ap.parse_args()
    if plt is None:
        sys.exit("bench/plot_loss.py: needs matplotlib (apt-get install python3-matplotlib; run with /usr/bin/python3)")
    if a.what == "run" and len(a.inputs) != 1:
        ap.error("run takes one metrics.jsonl")
    {"run": plot_run, "time": plot_time, "bpb": plot_bpb}[a.what](a)
    print(f"bench/plot_loss.py: wrote {a.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
