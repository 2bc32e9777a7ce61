#!/usr/bin/env python3
"""Prints the first line of a results file in bench/results/: which benchmark, on which machine,
with which engine, made by which command. Readers skip it ("kind": "header").

    python3 bench/header.py BENCHMARK --command "bench/run_all.sh" [--ptl build-perf/ptl] [--gpu]
                            [--peer "PyTorch 2.11 CUDA"] [--blas "..."]

machine: the CPU's model name (with /proc/cpuinfo's family and model numbers, which tell CPUs of
one name apart), its cores and memory; with --gpu the card, its driver and its clock
(nvidia-smi). engine: $PTL_ENGINE_VERSION when set (bench/gpu_run.sh sets it from the pack), else
`git describe --always --dirty` of the checkout; ptl_version: `ptl --version` of the binary measured.
"""

import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(cmd, **kw):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=20, **kw).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None


def cpu():
    fields = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if ":" in line:
                    k, v = (s.strip() for s in line.split(":", 1))
                    if k in ("model name", "cpu family", "model") and k not in fields:
                        fields[k] = v
    except OSError:
        pass
    name = fields.get("model name", "unknown CPU")
    if "cpu family" in fields:
        name += f" (cpu family {fields['cpu family']}, model {fields.get('model', '?')})"
    return name


def memory_gib():
    try:
        with open("/proc/meminfo") as f:
            kib = int(next(line for line in f if line.startswith("MemTotal")).split()[1])
        return round(kib / 2**20)
    except (OSError, StopIteration, ValueError):
        return None


def gpu():
    out = run(["nvidia-smi", "--query-gpu=name,driver_version,clocks.max.sm", "--format=csv,noheader"])
    if not out:
        return None
    name, driver, clock = (s.strip() for s in out.splitlines()[0].split(","))
    return {"gpu": name, "driver": driver, "max_sm_clock": clock}


def card_slug(name):
    """The card's short name for file names: 'NVIDIA H200' -> h200, 'NVIDIA H100 80GB HBM3' -> h100,
    'NVIDIA GeForce RTX 4090' -> rtx-4090: the words up to the first with a digit, lower case."""
    words = [w for w in name.lower().split() if w not in ("nvidia", "geforce", "amd", "radeon")]
    out = []
    for w in words:
        out.append("".join(c if c.isalnum() else "-" for c in w))
        if any(c.isdigit() for c in w):
            break
    return "-".join(out) or "gpu"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("benchmark", nargs="?", help="the benchmark's name (the results file's stem)")
    ap.add_argument("--command", default="", help="the command that made the file")
    ap.add_argument("--ptl", help="the ptl binary measured (its --version goes in)")
    ap.add_argument("--gpu", action="store_true", help="add the GPU card (nvidia-smi)")
    ap.add_argument("--blas", help="the BLAS configuration of the peer")
    ap.add_argument("--peer", help="what the engine is compared against")
    ap.add_argument(
        "--card-slug",
        action="store_true",
        help="print only the short name of this machine's GPU card (for file names) and exit",
    )
    a = ap.parse_args()
    if a.card_slug:
        g = gpu()
        if not g:
            sys.exit("bench/header.py: nvidia-smi found no GPU")
        print(card_slug(g["gpu"]))
        return
    if not a.benchmark:
        ap.error("give the benchmark's name")
    machine = {"cpu": cpu(), "cores": os.cpu_count(), "memory_gib": memory_gib()}
    if a.gpu:
        machine.update(gpu() or {"gpu": None})
    if a.blas:
        machine["blas"] = a.blas
    # The pack records the version of the checkout it was made from (bench/gpu_pack.sh): a copy of
    # the tree on a GPU machine may carry another repository state, or none.
    engine = os.environ.get("PTL_ENGINE_VERSION") or run(["git", "-C", ROOT, "describe", "--always", "--dirty"])
    h = {"kind": "header", "benchmark": a.benchmark, "machine": machine, "engine": engine}
    if a.ptl:
        h["ptl_version"] = run([a.ptl, "--version"])
    if a.peer:
        h["peer"] = a.peer
    h["command"] = a.command
    print(json.dumps(h))


if __name__ == "__main__":
    main()
