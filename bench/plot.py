#!/usr/bin/python3
"""Plots bench/cpu_vs_pytorch's JSON lines: ms/step of ptl and PyTorch per preset at one thread
count, with the speedup; a second panel shows ptl's 1 -> 2 thread speedup from `ptl bench --json`.

    /usr/bin/python3 bench/plot.py [bench/results/cpu_vs_pytorch.jsonl] [--threads 2]
                                   [--scaling bench/results/cpu_threads.jsonl | --scaling none]
                                   [--out docs/img/cpu_vs_pytorch.svg]

Needs matplotlib (Debian: apt-get install python3-matplotlib). Header lines ("kind": "header",
bench/header.py) are skipped.
"""

import argparse
import json
from collections import defaultdict
from pathlib import Path

try:  # only the plotting needs it: --help and a clear message work without
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: E402
except ImportError:
    plt = None


def read_jsonl(path):
    with open(path) as f:
        rows = [json.loads(line) for line in f if line.strip().startswith("{")]
    return [r for r in rows if r.get("kind") != "header"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "results",
        nargs="?",
        default="bench/results/cpu_vs_pytorch.jsonl",
        help="JSON lines of bench/cpu_vs_pytorch (default bench/results/cpu_vs_pytorch.jsonl)",
    )
    ap.add_argument("--threads", type=int, default=2, help="the thread count of the first panel (default 2)")
    ap.add_argument(
        "--scaling",
        default="bench/results/cpu_threads.jsonl",
        help="JSON lines of ptl bench --json at 1 and 2 threads ('none': one panel)",
    )
    ap.add_argument("--out", default="docs/img/cpu_vs_pytorch.svg")
    args = ap.parse_args()
    if plt is None:
        raise SystemExit("plot.py needs matplotlib: apt-get install python3-matplotlib")

    if args.scaling == "none":
        args.scaling = None
    rows = [r for r in read_jsonl(args.results) if r.get("threads", args.threads) == args.threads]
    if not rows:
        raise SystemExit(f"plot.py: no lines at {args.threads} threads in {args.results}")
    presets = [r["preset"] for r in rows]
    panels = 2 if args.scaling else 1
    fig, axes = plt.subplots(1, panels, figsize=(6.5 * panels, 4.2))
    ax = axes[0] if panels > 1 else axes
    x = range(len(rows))
    w = 0.38
    ax.bar([i - w / 2 for i in x], [r["ptl_ms_per_step"] for r in rows], w, label="ptl")
    ax.bar(
        [i + w / 2 for i in x], [r["pytorch_ms_per_step"] for r in rows], w, label="PyTorch 1.13 + OpenBLAS (SkylakeX)"
    )
    for i, r in enumerate(rows):
        ax.annotate(
            f"{r['speedup']:.2f}x",
            (i, max(r["ptl_ms_per_step"], r["pytorch_ms_per_step"])),
            ha="center",
            va="bottom",
            fontsize=8,
        )
    ax.set_yscale("log")
    ax.set_xticks(list(x))
    ax.set_xticklabels(presets)
    ax.set_ylabel("ms per training step (log scale)")
    threads = rows[0].get("threads", "?")
    ax.set_title(f"Training step, {threads} threads (labels: PyTorch / ptl)")
    ax.legend(fontsize=8)

    if args.scaling:
        # The best run of each (preset, threads): 1 thread the lower of wall and CPU time, 2
        # threads also the ptl runs of the A/B file when it was made at 2 threads (as bench/table.py).
        by = defaultdict(dict)
        for r in read_jsonl(args.scaling):
            t = r["threads"]
            ms = min(r["ms_per_step"], r["cpu_ms_per_step"]) if t == 1 else r["ms_per_step"]
            by[r["preset"]][t] = min(by[r["preset"]].get(t, float("inf")), ms)
        for r in rows:
            if r.get("threads") == 2 and 2 in by[r["preset"]]:
                by[r["preset"]][2] = min([by[r["preset"]][2]] + r["ptl_runs"])
        names = [p for p in presets if 1 in by[p] and 2 in by[p]] or [p for p in by if 1 in by[p] and 2 in by[p]]
        ax2 = axes[1]
        ax2.bar(range(len(names)), [by[p][1] / by[p][2] for p in names], 0.6)
        ax2.axhline(2.0, color="gray", lw=0.8, ls="--")
        ax2.set_xticks(range(len(names)))
        ax2.set_xticklabels(names)
        ax2.set_ylabel("speedup 1 -> 2 threads")
        ax2.set_title("ptl 1 -> 2 threads (best runs)")
    fig.tight_layout()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
