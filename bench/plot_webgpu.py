#!/usr/bin/python3
"""Plot of the GPU benchmark (bench/results/webgpu_vs_cuda_<card>.jsonl, from bench/gpu_run.sh full):
training speedup of WebGPU over the WebAssembly SIMD+threads build (the machine's cores) and over
PyTorch eager CUDA, per preset, with the issue's targets for the WASM curve.

    /usr/bin/python3 bench/plot_webgpu.py [bench/results/webgpu_vs_cuda_<card>.jsonl] [--out docs/img/webgpu_speedup.svg]

Without a file: the one bench/results/webgpu_vs_cuda_*.jsonl (name it when there are several).
"""

import argparse
import glob
import json

try:  # only the plotting needs it: --help and a clear message work without
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: E402
except ImportError:
    plt = None

ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
ap.add_argument("jsonl", nargs="?")
ap.add_argument("--out", default="docs/img/webgpu_speedup.svg")
a = ap.parse_args()
if plt is None:
    raise SystemExit("plot_webgpu.py needs matplotlib: apt-get install python3-matplotlib")
if a.jsonl is None:
    found = sorted(glob.glob("bench/results/webgpu_vs_cuda_*.jsonl"))
    if len(found) != 1:
        raise SystemExit(f"plot_webgpu.py: name the file ({len(found)} webgpu_vs_cuda_*.jsonl in bench/results)")
    a.jsonl = found[0]
rows = [json.loads(l) for l in open(a.jsonl) if l.strip()]
head = next((r for r in rows if r["kind"] == "header"), {})
card = head.get("machine", {}).get("gpu") or "GPU"
train = [r for r in rows if r["kind"] == "train"]
cores = next((r["wasm_threads"] for r in train if "wasm_threads" in r), "?")
names = [r["preset"] for r in train]
x = list(range(len(names)))

fig, ax = plt.subplots(figsize=(7.5, 4.2))
wx = [i for i, r in zip(x, train) if "speedup_vs_wasm" in r]
ax.plot(
    wx,
    [train[i]["speedup_vs_wasm"] for i in wx],
    "o-",
    color="C0",
    label=f"WebGPU / WASM SIMD+threads ({cores} threads)",
)
for i in wx:
    ax.annotate(
        f"{train[i]['speedup_vs_wasm']:.1f}x",
        (i, train[i]["speedup_vs_wasm"]),
        textcoords="offset points",
        xytext=(0, 7),
        ha="center",
        fontsize=8,
        color="C0",
    )
tx = [i for i, r in zip(x, train) if "target_speedup_vs_wasm" in r]
ax.plot(
    tx, [train[i]["target_speedup_vs_wasm"] for i in tx], "s--", color="C7", label="target (original project's curve)"
)
px = [i for i, r in zip(x, train) if "speedup_vs_pytorch" in r]
ax.plot(
    px,
    [train[i]["speedup_vs_pytorch"] for i in px],
    "^-",
    color="C3",
    label="WebGPU / PyTorch eager CUDA fp32 (same GPU)",
)
ax.axhline(1.0, color="k", lw=0.6)
ax.set_yscale("log")
ax.set_xticks(x)
ax.set_xticklabels(names)
ax.set_ylabel("speedup of a WebGPU training step (x)")
ax.set_title(f"Training step speed, {card} (WebGPU via Dawn/Vulkan, fp32)")
ax.grid(True, which="both", alpha=0.3)
ax.set_ylim(0.4, 90)
ax.legend(fontsize=8, loc="lower left")
fig.tight_layout()
fig.savefig(a.out)
print(a.out)
