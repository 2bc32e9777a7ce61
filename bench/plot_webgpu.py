#!/usr/bin/python3
"""Plot of the H200 benchmark (bench/results/h200-webgpu.jsonl, from bench/gpu_run.sh + gpu_merge.py):
training speedup of WebGPU over the WebAssembly SIMD+threads build (16 cores) and over PyTorch
eager CUDA, per preset, with the issue's targets for the WASM curve.

    /usr/bin/python3 bench/plot_webgpu.py [bench/results/h200-webgpu.jsonl] [--out docs/img/webgpu_speedup.svg]
"""
import argparse
import json

try:  # only the plotting needs it: --help and a clear message work without
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: E402
except ImportError:
    plt = None

ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
ap.add_argument("jsonl", nargs="?", default="bench/results/h200-webgpu.jsonl")
ap.add_argument("--out", default="docs/img/webgpu_speedup.svg")
a = ap.parse_args()
if plt is None:
    raise SystemExit("plot_webgpu.py needs matplotlib: apt-get install python3-matplotlib")
rows = [json.loads(l) for l in open(a.jsonl) if l.strip()]
train = [r for r in rows if r["kind"] == "train"]
names = [r["preset"] for r in train]
x = list(range(len(names)))

fig, ax = plt.subplots(figsize=(7.5, 4.2))
wx = [i for i, r in zip(x, train) if "speedup_vs_wasm" in r]
ax.plot(wx, [train[i]["speedup_vs_wasm"] for i in wx], "o-", color="C0", label="WebGPU / WASM SIMD+threads (16 cores)")
for i in wx:
    ax.annotate(f'{train[i]["speedup_vs_wasm"]:.1f}x', (i, train[i]["speedup_vs_wasm"]), textcoords="offset points", xytext=(0, 7), ha="center", fontsize=8, color="C0")
tx = [i for i, r in zip(x, train) if "target_speedup_vs_wasm" in r]
ax.plot(tx, [train[i]["target_speedup_vs_wasm"] for i in tx], "s--", color="C7", label="target (original project's curve)")
px = [i for i, r in zip(x, train) if "speedup_vs_pytorch" in r]
ax.plot(px, [train[i]["speedup_vs_pytorch"] for i in px], "^-", color="C3", label="WebGPU / PyTorch eager CUDA fp32 (same GPU)")
ax.axhline(1.0, color="k", lw=0.6)
ax.set_yscale("log")
ax.set_xticks(x)
ax.set_xticklabels(names)
ax.set_ylabel("speedup of a WebGPU training step (x)")
ax.set_title("Training step speed, NVIDIA H200 (WebGPU via Dawn/Vulkan, fp32)")
ax.grid(True, which="both", alpha=0.3)
ax.set_ylim(0.4, 90)
ax.legend(fontsize=8, loc="lower left")
fig.tight_layout()
fig.savefig(a.out)
print(a.out)
