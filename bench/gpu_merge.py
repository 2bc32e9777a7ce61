#!/usr/bin/env python3
"""Puts the GPU benchmark's three sides next to each other (bench/gpu_run.sh runs it).

    python3 bench/gpu_merge.py --webgpu webgpu.jsonl --torch torch.jsonl [--wasm wasm.jsonl] > merged.jsonl

Output, one JSON object per line:
  {"kind":"matmul","tag"?,"layout","shape","M","N","K","webgpu_gflops","cublas_gflops","ratio","kernel"}
      ratio = WebGPU GFLOP/s / cuBLAS GFLOP/s (fp32, TF32 off) at the same shape and layout
  {"kind":"train","preset","batch","tokens_per_step","webgpu_ms_per_step","webgpu_tokens_per_s",
   "pytorch_ms_per_step","pytorch_variant","pytorch_python_ref_ms","pytorch_fused_ms","speedup_vs_pytorch",
   "wasm_ms_per_step","wasm_threads","speedup_vs_wasm","target_speedup_vs_wasm"}
      speedup_vs_pytorch = PyTorch ms/step (the faster of its two variants) / WebGPU ms/step
      speedup_vs_wasm = WASM SIMD+threads ms/step / WebGPU ms/step
  {"kind":"matmul_summary","tag"?,"layout","shape":"4096^3","ratio",...} and a per-tag geometric mean
"""

import argparse
import json
import sys
import math

TARGET_WASM = {"small": 2.6, "medium": 6.8, "large": 9.3, "xl": 12.1}


def read(path):
    if not path:
        return []
    out = []
    try:
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line.startswith("{"):
                    try:
                        out.append(json.loads(line))
                    except json.JSONDecodeError:
                        pass
    except FileNotFoundError:
        # A stage of bench/gpu_run.sh that failed leaves its file out: merge the rest, but say so.
        print(f"gpu_merge: {path} not found; merging without it", file=sys.stderr)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--webgpu")
    ap.add_argument("--torch")
    ap.add_argument("--wasm")
    a = ap.parse_args()
    if not (a.webgpu or a.torch or a.wasm):
        ap.error("give at least one of --webgpu, --torch, --wasm")
    W, T, A = read(a.webgpu), read(a.torch), read(a.wasm)
    emit = lambda o: print(json.dumps(o))  # noqa: E731
    cublas = {(o["layout"], o["shape"]): o for o in T if o.get("kind") == "torch_matmul"}
    per_tag = {}
    for o in W:
        if o.get("kind") != "matmul" or "gflops" not in o:
            continue
        c = cublas.get((o.get("layout", "fwd"), o["shape"]))
        m = {"kind": "matmul"}
        if "tag" in o:
            m["tag"] = o["tag"]
        m.update(
            {
                "layout": o.get("layout", "fwd"),
                "shape": o["shape"],
                "M": o["M"],
                "N": o["N"],
                "K": o["K"],
                "webgpu_gflops": o["gflops"],
                "cublas_gflops": c["gflops"] if c else None,
                "ratio": round(o["gflops"] / c["gflops"], 3) if c else None,
                "kernel": o.get("kernel"),
                "max_rel_err": o.get("max_rel_err"),
            }
        )
        emit(m)
        if m["ratio"]:
            per_tag.setdefault(m.get("tag", ""), []).append(m)
    for tag, ms in per_tag.items():
        for m in ms:
            if m["shape"] == "4096^3":
                emit(
                    {
                        "kind": "matmul_summary",
                        **({"tag": tag} if tag else {}),
                        "layout": m["layout"],
                        "shape": "4096^3",
                        "webgpu_gflops": m["webgpu_gflops"],
                        "cublas_gflops": m["cublas_gflops"],
                        "ratio": m["ratio"],
                    }
                )
        rs = [m["ratio"] for m in ms if m["shape"] != "4096^3"]
        if rs:
            emit(
                {
                    "kind": "matmul_summary",
                    **({"tag": tag} if tag else {}),
                    "shape": "presets' shapes",
                    "count": len(rs),
                    "ratio_geomean": round(math.exp(sum(math.log(r) for r in rs) / len(rs)), 3),
                    "ratio_min": min(rs),
                    "ratio_max": max(rs),
                }
            )
    tr = {o["preset"]: o for o in W if o.get("kind") == "train_step"}
    pt = {}
    for o in T:
        if o.get("kind") == "torch_train":
            pt.setdefault(o["preset"], {})[o["variant"]] = o
    wa = {o["preset"]: o for o in A if o.get("kind") == "wasm_train"}
    ws = {o["preset"]: o for o in A if o.get("kind") == "wasm_skipped"}
    for p in list(dict.fromkeys(list(tr) + list(pt) + list(wa))):
        g, ps, w = tr.get(p), pt.get(p, {}), wa.get(p)
        best = min(ps.values(), key=lambda o: o["ms_per_step"]) if ps else None
        o = {"kind": "train", "preset": p}
        if g:
            tokens = round(g["tokens_per_s"] * g["ms_per_step"] / 1000)
            o.update(
                {
                    "batch": g["batch"],
                    "tokens_per_step": tokens,
                    "webgpu_ms_per_step": g["ms_per_step"],
                    "webgpu_tokens_per_s": g["tokens_per_s"],
                    "webgpu_dispatches": g.get("dispatches"),
                }
            )
        if best:
            o.update(
                {
                    "pytorch_ms_per_step": best["ms_per_step"],
                    "pytorch_variant": best["variant"],
                    "pytorch_tokens_per_s": best["tokens_per_s"],
                    "pytorch_python_ref_ms": ps.get("python_ref", {}).get("ms_per_step"),
                    "pytorch_fused_ms": ps.get("fused", {}).get("ms_per_step"),
                }
            )
            if g:
                o["speedup_vs_pytorch"] = round(best["ms_per_step"] / g["ms_per_step"], 2)
        if w:
            o.update(
                {
                    "wasm_ms_per_step": w["ms_per_step"],
                    "wasm_threads": w["threads"],
                    "wasm_steps": w["steps"],
                    "wasm_tokens_per_s": w["tokens_per_s"],
                }
            )
            if g:
                o["speedup_vs_wasm"] = round(w["ms_per_step"] / g["ms_per_step"], 2)
        elif p in ws:
            o["wasm_skipped"] = ws[p]["reason"]
        if p in TARGET_WASM:
            o["target_speedup_vs_wasm"] = TARGET_WASM[p]
        emit(o)


if __name__ == "__main__":
    main()
