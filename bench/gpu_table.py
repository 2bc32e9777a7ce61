#!/usr/bin/env python3
"""Prints the GPU tables of docs/performance.md from bench/gpu_run.sh's results files.

    python3 bench/gpu_table.py [bench/results/webgpu_vs_cuda_<card>.jsonl] [bench/results/webgpu_matmul_<card>.jsonl]

Without files: those of bench/results/ (one card's). The training table comes from a
webgpu_vs_cuda file (`train` lines), the 4096³ table from a webgpu_matmul file (`matmul` lines
with a `tag`; cuBLAS in the same run).
"""

import argparse
import glob
import json
import math
import sys


def read(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip().startswith("{")]


def machine(rows):
    h = next((r for r in rows if r.get("kind") == "header"), None)
    if not h:
        return ""
    m = h["machine"]
    return f"{m.get('gpu', 'GPU')} (driver {m.get('driver', '?')}), {m.get('cores', '?')} cores of {m.get('cpu', '?')}; engine {h.get('engine')}"


def train_table(rows):
    print(f"\n#### Training step: WebGPU against PyTorch CUDA and WebAssembly; {machine(rows)}\n")
    print(
        "| preset | batch x ctx | WebGPU ms/step | WebGPU tokens/s | PyTorch CUDA ms/step | WebGPU vs PyTorch | "
        "WASM ms/step | WebGPU vs WASM |"
    )
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        if r.get("kind") != "train" or "webgpu_ms_per_step" not in r:
            continue
        ctx = r["tokens_per_step"] // r["batch"]
        wasm = f"{r['wasm_ms_per_step']:.1f}" if "wasm_ms_per_step" in r else "not run"
        vs_wasm = f"{r['speedup_vs_wasm']:.1f}x" if "speedup_vs_wasm" in r else "-"
        print(
            f"| {r['preset']} | {r['batch']} x {ctx} | {r['webgpu_ms_per_step']:.2f} | {r['webgpu_tokens_per_s']:,} | "
            f"{r['pytorch_ms_per_step']:.2f} | {r['speedup_vs_pytorch']:.2f}x | {wasm} | {vs_wasm} |"
        )


LABELS = {
    "auto": "default choice",
    "off": "hand-written kernels only (linear_nt, linear_wide)",
    "auto_norobust": "default, Dawn's robustness checks off",
}


def matmul_table(rows):
    print(f"\n#### Matrix products at 4096³ against cuBLAS (GFLOP/s, ratio); {machine(rows)}\n")
    at = {}
    cublas = {}
    for r in rows:
        if r.get("kind") == "matmul" and r["shape"] == "4096^3" and r.get("tag") in LABELS:
            at.setdefault(r["tag"], {})[r["layout"]] = r
            cublas.setdefault(r["layout"], r["cublas_gflops"])
    layouts = ["fwd", "dx", "dW"]
    print("| kernel | " + " | ".join(layouts) + " |")
    print("| --- |" + " ---: |" * len(layouts))
    print("| cuBLAS fp32, TF32 off | " + " | ".join(f"{cublas[l]:,.0f}" for l in layouts if l in cublas) + " |")
    for tag in LABELS:
        if tag in at:
            print(
                f"| {LABELS[tag]} | "
                + " | ".join(
                    f"{at[tag][l]['webgpu_gflops']:,.0f} ({at[tag][l]['ratio']:.2f})" for l in layouts if l in at[tag]
                )
                + " |"
            )
    shapes = [
        r["ratio"]
        for r in rows
        if r.get("kind") == "matmul" and r.get("tag") == "auto" and r["shape"] != "4096^3" and r.get("ratio")
    ]
    if shapes:
        g = math.exp(sum(math.log(x) for x in shapes) / len(shapes))
        print(
            f"\nThe default at the presets' Linear shapes ({len(shapes)} shape x layout pairs): geometric mean of the "
            f"ratio to cuBLAS {g:.2f}, from {min(shapes):.2f} to {max(shapes):.2f}."
        )


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="*")
    a = ap.parse_args()
    files = a.files or sorted(
        glob.glob("bench/results/webgpu_vs_cuda_*.jsonl") + glob.glob("bench/results/webgpu_matmul_*.jsonl")
    )
    if not files:
        sys.exit("gpu_table.py: no webgpu_vs_cuda_*.jsonl or webgpu_matmul_*.jsonl in bench/results (name the files)")
    for f in files:
        rows = read(f)
        if any(r.get("kind") == "train" for r in rows):
            train_table(rows)
        elif any(r.get("kind") == "matmul" for r in rows):
            matmul_table(rows)


if __name__ == "__main__":
    main()
