#!/usr/bin/python3
"""Turns bench/wasm.mjs's JSON lines into markdown tables and an SVG plot (docs/performance.md).

    /usr/bin/python3 bench/wasm_table.py [bench/results/wasm.jsonl ...] [--svg docs/img/wasm_speed.svg]

Prints to stdout: (1) every measurement (ms/step, tokens/s, native and native128 at the same thread
count, speed relative to each); (2) the issue's targets per preset and environment: SIMD over
scalar (>= 2.5x), SIMD + threads over SIMD single-thread (>= 1.8x), the browser's best build
over native128 (>= 0.6x). With --svg, a log-scale bar chart of ms/step per preset.
Lines that are not JSON objects with "preset" and "build" are skipped (the header line of
bench/header.py, progress output); the header's machine and engine are printed under the tables.
"""

import argparse
import json
import sys

PRESET_ORDER = ["tiny", "small", "medium", "large", "xl", "huge", "massive", "mega", "behemoth"]
BUILD_ORDER = ["scalar", "simd", "simd-threads", "memory64"]
ENV_ORDER = ["node", "chromium"]


def load(paths):
    rows, headers = [], []
    for p in paths:
        with sys.stdin if p == "-" else open(p) as f:
            for line in f:
                line = line.strip()
                if not line.startswith("{"):
                    continue
                try:
                    r = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if r.get("kind") == "header":
                    headers.append(r)
                elif "preset" in r and "build" in r and "ms_per_step" in r:
                    rows.append(r)
    key = lambda r: (
        PRESET_ORDER.index(r["preset"]) if r["preset"] in PRESET_ORDER else 99,
        ENV_ORDER.index(r.get("env", "node")) if r.get("env", "node") in ENV_ORDER else 9,
        BUILD_ORDER.index(r["build"]) if r["build"] in BUILD_ORDER else 9,
    )
    return sorted(rows, key=key), headers


def fmt(x, digits=1, suffix=""):
    if x is None:
        return "–"
    return f"{x:.{digits}f}{suffix}"


def ratio(a, b):
    return a / b if a and b else None


def compact(rows):
    """ms/step per preset and environment: one column per build, then native128 and native at the
    single-thread builds' and the threaded build's thread counts."""
    builds = [b for b in BUILD_ORDER if any(r["build"] == b for r in rows)]
    nt = max((r.get("threads") or 1) for r in rows)
    head = [f"{b} ({nt} threads)" if b == "simd-threads" else b for b in builds]
    out = [
        "| preset | env | " + " | ".join(head) + f" | native128, 1 / {nt} threads | native, 1 / {nt} threads |",
        "| --- | --- |" + " ---: |" * (len(builds) + 2),
    ]
    groups = {}
    for r in rows:
        groups.setdefault((r["preset"], r.get("env", "node")), {})[r["build"]] = r
    for (preset, env), g in groups.items():
        one = next((g[b] for b in ("simd", "scalar", "memory64") if b in g), None)
        many = g.get("simd-threads")
        nat = lambda key: " / ".join(fmt(x.get(key)) if x else "–" for x in (one, many))
        out.append(
            f"| {preset} | {env} | "
            + " | ".join(fmt(g[b]["ms_per_step"]) if b in g else "–" for b in builds)
            + f" | {nat('native128_ms_per_step')} | {nat('native_ms_per_step')} |"
        )
    return "\n".join(out)


def tables(rows):
    out = ["ms per training step (median of the rounds):", "", compact(rows), "", "Every measurement:", ""]
    out.append(
        "| preset | env | build | threads | ms/step | tokens/s | native ms/step | native128 ms/step | speed vs native128 | speed vs native | ms/step per round |"
    )
    out.append("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    for r in rows:
        out.append(
            "| {} | {} | {} | {} | {} | {:,} | {} | {} | {} | {} | {} |".format(
                r["preset"],
                r.get("env", "node"),
                r["build"],
                r.get("threads", "?"),
                fmt(r["ms_per_step"]),
                int(r.get("tokens_per_s") or 0),
                fmt(r.get("native_ms_per_step")),
                fmt(r.get("native128_ms_per_step")),
                fmt(ratio(r.get("native128_ms_per_step"), r["ms_per_step"]), 2, "x"),
                fmt(ratio(r.get("native_ms_per_step"), r["ms_per_step"]), 2, "x"),
                ", ".join(fmt(x) for x in r.get("round_ms", [])) or "–",
            )
        )
    out.append("")
    out.append("Speed ratios (higher is faster; targets from issue 4 in brackets):")
    out.append("")
    out.append(
        "| preset | env | SIMD / scalar (≥ 2.5x) | SIMD+threads / SIMD (≥ 1.8x) | best build / native128 (≥ 0.6x) | best build / native |"
    )
    out.append("| --- | --- | ---: | ---: | ---: | ---: |")
    groups = {}
    for r in rows:
        groups.setdefault((r["preset"], r.get("env", "node")), {})[r["build"]] = r
    for (preset, env), g in groups.items():
        ms = {b: g[b]["ms_per_step"] for b in g}
        simd_scalar = ratio(ms.get("scalar"), ms.get("simd"))
        threads_simd = ratio(ms.get("simd"), ms.get("simd-threads"))
        wasm32 = [b for b in g if b != "memory64"] or list(g)
        best = min(wasm32, key=lambda b: g[b]["ms_per_step"])
        b = g[best]
        out.append(
            "| {} | {} | {} | {} | {} ({}) | {} |".format(
                preset,
                env,
                fmt(simd_scalar, 2, "x"),
                fmt(threads_simd, 2, "x"),
                fmt(ratio(b.get("native128_ms_per_step"), b["ms_per_step"]), 2, "x"),
                best,
                fmt(ratio(b.get("native_ms_per_step"), b["ms_per_step"]), 2, "x"),
            )
        )
    runtimes = sorted({r.get("runtime", "?") for r in rows})
    machines = sorted({r.get("machine", "?") for r in rows})
    out.append("")
    out.append("Runtimes: " + "; ".join(runtimes) + ". Machine: " + "; ".join(machines) + ".")
    return "\n".join(out)


def plot(rows, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    presets = [p for p in PRESET_ORDER if any(r["preset"] == p for r in rows)]
    series = []  # (label, {preset: ms})
    for env in ENV_ORDER:
        for b in BUILD_ORDER:
            vals = {r["preset"]: r["ms_per_step"] for r in rows if r.get("env", "node") == env and r["build"] == b}
            if vals:
                series.append((f"{b} ({env})", vals))
    for key, label in (("native128_ms_per_step", "native128"), ("native_ms_per_step", "native (AVX-512)")):
        # Native at the threaded build's thread count when there is one, else at 1 thread.
        vals = {}
        for p in presets:
            rs = [r for r in rows if r["preset"] == p and r.get(key)]
            rs.sort(key=lambda r: -(r.get("threads") or 1))
            if rs:
                vals[p] = rs[0][key]
        if vals:
            t = max((r.get("threads") or 1) for r in rows)
            series.append((f"{label}, {t} thr", vals))
    fig, ax = plt.subplots(figsize=(max(6, 1.8 * len(presets) + 2) + 2.5, 4.2))
    width = 0.8 / max(1, len(series))
    for i, (label, vals) in enumerate(series):
        xs = [j + (i - (len(series) - 1) / 2) * width for j, p in enumerate(presets) if p in vals]
        ys = [vals[p] for p in presets if p in vals]
        ax.bar(xs, ys, width, label=label)
    ax.set_xticks(range(len(presets)))
    ax.set_xticklabels(presets)
    ax.set_yscale("log")
    ax.set_ylabel("ms per training step (log, lower is faster)")
    ax.set_title("Training step time: WebAssembly builds vs native")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.grid(axis="y", which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)  # format from the extension (.svg for the docs)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "files",
        nargs="*",
        default=["bench/results/wasm.jsonl"],
        help="JSON-lines files from bench/wasm.sh ('-' = stdin; default bench/results/wasm.jsonl)",
    )
    ap.add_argument("--svg", help="write a bar chart here")
    a = ap.parse_args()
    rows, headers = load(a.files)
    if not rows:
        sys.exit("wasm_table.py: no bench/wasm.mjs lines found in " + ", ".join(a.files))
    print(tables(rows))
    for h in headers:
        print(
            f"\n{h['machine'].get('cpu')}, {h['machine'].get('cores')} cores; engine {h.get('engine')}; "
            f"`{h.get('command')}`"
        )
    if a.svg:
        plot(rows, a.svg)
        print(f"\n(plot: {a.svg})", file=sys.stderr)


if __name__ == "__main__":
    main()
