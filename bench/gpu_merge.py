#!/usr/bin/env python3
"""Puts the GPU benchmark's three sides next to each other (bench/gpu_run.sh runs it).

    python3 bench/gpu_merge.py --webgpu webgpu.jsonl --torch torch.jsonl [--wasm wasm.jsonl]
                               [--fma fma.jsonl] [--gpu-name "NVIDIA H100 80GB HBM3"] [--peak-tflops 67] > merged.jsonl

Output, one JSON object per line:
  {"kind":"matmul","tag"?,"layout","shape","M","N","K","webgpu_gflops","cublas_gflops","ratio","kernel"}
      ratio = WebGPU GFLOP/s / cuBLAS GFLOP/s (fp32, TF32 off) at the same shape and layout
  {"kind":"train","preset","batch","tokens_per_step","webgpu_ms_per_step","webgpu_tokens_per_s",
   "pytorch_ms_per_step","pytorch_variant","pytorch_python_ref_ms","pytorch_fused_ms","speedup_vs_pytorch",
   "wasm_ms_per_step","wasm_threads","speedup_vs_wasm","target_speedup_vs_wasm"}
      speedup_vs_pytorch = PyTorch ms/step (the faster of its two variants) / WebGPU ms/step
      speedup_vs_wasm = WASM SIMD+threads ms/step / WebGPU ms/step
  {"kind":"matmul_summary","tag"?,"layout","shape":"4096^3","ratio",...} and a per-tag geometric mean
  {"kind":"gpt2","model","variant","batch","seq","tokens_per_step","flops_per_step",
   "webgpu_ms_per_step","webgpu_tokens_per_s","webgpu_tflops","webgpu_fraction_of_peak",
   "pytorch_ms_per_step","pytorch_optimizer","pytorch_python_ref_ms","pytorch_fused_ms","pytorch_tokens_per_s",
   "pytorch_tflops","pytorch_fraction_of_peak","ratio","target_ratio","peak_fp32_tflops","peak_source",
   "webgpu_fma_tflops","webgpu_fraction_of_fma", losses, "webgpu_error"/"pytorch_error" where a side failed}
      the GPT-2 steps of webgpu_bench.mjs --gpt2 and pytorch_cuda.py --gpt2 (full and LoRA);
      ratio = PyTorch ms/step (the faster of its two optimizers) / WebGPU ms/step (> 1: WebGPU faster);
      fraction_of_peak = flops_per_step / time / the card's fp32 peak (peak_fp32_tflops of --gpu-name,
      or --peak-tflops); webgpu_fraction_of_fma: the same over the FMA ceiling that webgpu_fma_peak.mjs
      measured on this WebGPU path (--fma).
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


# fp32 peak (non-tensor-core, dense) in TFLOP/s, from NVIDIA's datasheets: H100 SXM5 67, H100 PCIe 51,
# H100 NVL 60; H200 SXM 67, H200 NVL 60. nvidia-smi names the SXM cards "NVIDIA H100 80GB HBM3" and
# "NVIDIA H200".
def peak_fp32_tflops(gpu_name):
    n = (gpu_name or "").upper()
    if "H200" in n:
        return (60.0, "H200 NVL datasheet") if "NVL" in n else (67.0, "H200 SXM datasheet")
    if "H100" in n:
        if "PCIE" in n:
            return 51.0, "H100 PCIe datasheet"
        if "NVL" in n:
            return 60.0, "H100 NVL datasheet"
        return 67.0, "H100 SXM5 datasheet"
    return None, None


def merge_gpt2(W, T, F, gpu_name, peak_arg, emit):
    peak, source = (peak_arg, "--peak-tflops") if peak_arg else peak_fp32_tflops(gpu_name)
    fma = max((o["gflops"] / 1000 for o in F if o.get("kind") == "fma_peak" and "gflops" in o), default=None)
    wg = {(o["model"], o["variant"]): o for o in W if o.get("kind") == "gpt2_step"}
    pt = {}
    for o in T:
        if o.get("kind") == "torch_gpt2_step":
            pt.setdefault((o["model"], o["variant"]), {})[o.get("optimizer", "?")] = o
    for key in list(dict.fromkeys(list(wg) + list(pt))):
        g, ps = wg.get(key), pt.get(key, {})
        ok = {k: v for k, v in ps.items() if "ms_per_step" in v}
        best = min(ok.values(), key=lambda o: o["ms_per_step"]) if ok else None
        o = {"kind": "gpt2", "model": key[0], "variant": key[1]}
        ref = g if g and "ms_per_step" in g else best
        if ref:
            tokens = ref["batch"] * ref["seq"]
            o.update({"batch": ref["batch"], "seq": ref["seq"], "tokens_per_step": tokens})
            o["flops_per_step"] = ref["flops_per_step"]
            for k in ("lora_rank", "lora_alpha", "params", "trainable_params"):
                if k in ref:
                    o[k] = ref[k]
        frac = lambda ms: round(o["flops_per_step"] / (ms * 1e9) / peak, 4) if peak else None  # noqa: E731
        if g and "ms_per_step" in g:
            o.update(
                {
                    "webgpu_ms_per_step": g["ms_per_step"],
                    "webgpu_tokens_per_s": g["tokens_per_s"],
                    "webgpu_tflops": g["tflops"],
                    "webgpu_fraction_of_peak": frac(g["ms_per_step"]),
                    "webgpu_buffer_gib": g.get("buffer_gib"),
                    "webgpu_loss_first": g.get("loss_first"),
                    "webgpu_loss_last": g.get("loss_last"),
                }
            )
            if fma:
                o["webgpu_fraction_of_fma"] = round(g["tflops"] / fma, 4)
        elif g:
            o["webgpu_error"] = g.get("error")
        if best:
            o.update(
                {
                    "pytorch_ms_per_step": best["ms_per_step"],
                    "pytorch_optimizer": best["optimizer"],
                    "pytorch_python_ref_ms": ok.get("python_ref", {}).get("ms_per_step"),
                    "pytorch_fused_ms": ok.get("fused", {}).get("ms_per_step"),
                    "pytorch_tokens_per_s": best["tokens_per_s"],
                    "pytorch_tflops": best["tflops"],
                    "pytorch_fraction_of_peak": frac(best["ms_per_step"]),
                    "pytorch_max_memory_mib": best.get("max_memory_mib"),
                    "pytorch_loss_first": best.get("loss_first"),
                    "pytorch_loss_last": best.get("loss_last"),
                }
            )
        errs = [v["error"] for v in ps.values() if "error" in v]
        if errs:
            o["pytorch_error"] = errs[0]
        if best and "webgpu_ms_per_step" in o:
            o["ratio"] = round(best["ms_per_step"] / o["webgpu_ms_per_step"], 3)
        o["target_ratio"] = 1.0
        o["peak_fp32_tflops"], o["peak_source"] = peak, source
        if fma:
            o["webgpu_fma_tflops"] = round(fma, 2)
        emit(o)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--webgpu")
    ap.add_argument("--torch")
    ap.add_argument("--wasm")
    ap.add_argument("--fma", help="webgpu_fma_peak.mjs's output (the WebGPU path's measured FMA ceiling)")
    ap.add_argument("--gpu-name", help="nvidia-smi's name of the card (its fp32 peak: peak_fp32_tflops)")
    ap.add_argument("--peak-tflops", type=float, help="the card's fp32 peak, where --gpu-name does not give it")
    a = ap.parse_args()
    if not (a.webgpu or a.torch or a.wasm):
        ap.error("give at least one of --webgpu, --torch, --wasm")
    W, T, A = read(a.webgpu), read(a.torch), read(a.wasm)
    emit = lambda o: print(json.dumps(o))  # noqa: E731
    merge_gpt2(W, T, read(a.fma), a.gpu_name, a.peak_tflops, emit)
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
