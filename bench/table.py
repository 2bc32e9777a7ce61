#!/usr/bin/python3
"""Prints the CPU result tables from the JSON lines bench/run_all.sh wrote (bench/results/ by
default), and first a verdict on each target of issue 3 (the fast CPU backend) from the same figures.

    /usr/bin/python3 bench/table.py [bench/results] [--peak GFLOP/s]

Files read (each optional): cpu_vs_pytorch.jsonl (bench/cpu_vs_pytorch at 1 and 2 threads),
cpu_threads.jsonl (ptl bench --json at 1 and 2 threads), cpu_matmul_vs_openblas.jsonl
(bench/matmul_vs_openblas at 1 and 2 threads). Each file's first line is bench/header.py's
(machine, engine, command); the figures follow.
"""

import argparse
import json
import statistics
from pathlib import Path

# PyTorch, 2 threads, OpenBLAS SkylakeX: the fixed figures of issue 3, measured on a quiet Zen 5.
QUIET_PYTORCH_2T = {"small": 24, "medium": 64, "large": 159, "xl": 185, "huge": 634}
FILES = ("cpu_vs_pytorch.jsonl", "cpu_threads.jsonl", "cpu_matmul_vs_openblas.jsonl")
ORDER = ["tiny", "small", "medium", "large", "xl", "huge", "massive", "mega", "behemoth"]


def lines(path):
    p = Path(path)
    if not p.exists():
        return []
    return [json.loads(line) for line in p.read_text().splitlines() if line.strip().startswith("{")]


def rows(path, threads=None):
    """The figures of a results file (its header left out), those of one thread count if given."""
    return [r for r in lines(path) if r.get("kind") != "header" and (threads is None or r.get("threads") == threads)]


def header(path):
    return next((r for r in lines(path) if r.get("kind") == "header"), None)


def best(rs, preset, threads, key="ms_per_step"):
    c = [r[key] for r in rs if r["preset"] == preset and r["threads"] == threads]
    return min(c) if c else None


def thread_figures(pt, ab2, p):
    """Best 1-thread wall and CPU ms of a preset, and its best 2-thread wall ms (ptl bench's and
    the ptl side of the PyTorch A/B's): the figures of the 1 -> 2 column."""
    w1, c1, w2 = best(pt, p, 1), best(pt, p, 1, "cpu_ms_per_step"), best(pt, p, 2)
    if w2 is not None:
        w2 = min([w2] + [x for r in ab2 if r["preset"] == p for x in r["ptl_runs"]])
    return w1, c1, w2


def matmul_medians(mm):
    """Median ratio to OpenBLAS per product of the presets' shapes (2048^3 left out)."""
    groups = {}
    for r in mm:
        if r["preset"] != "-":
            groups.setdefault((r["preset"], r["layer"], r["product"]), []).append(r["ratio"])
    return {k: statistics.median(v) for k, v in groups.items()}


def targets(d):
    """The issue's targets, each with the figures it rests on and met / NOT MET. The step targets
    are read against PyTorch in the same run (the ratio of the medians, as in the tables, with
    the ratios of the A/B rounds beside it: a noisy host can move the two sides apart) and
    against the issue's fixed figures (QUIET_PYTORCH_2T, a Zen 5's)."""
    ab2 = rows(d / "cpu_vs_pytorch.jsonl", 2)
    pt = rows(d / "cpu_threads.jsonl")
    mm1, mm2 = rows(d / "cpu_matmul_vs_openblas.jsonl", 1), rows(d / "cpu_matmul_vs_openblas.jsonl", 2)
    if not (ab2 or pt or mm1):
        return
    out = []
    verdict = lambda ok: "met" if ok else "**NOT MET**"
    for goal, group in ((2.0, ["tiny", "small", "medium"]), (1.2, ["large", "xl", "huge"])):
        vs = [r for r in ab2 if r["preset"] in group]
        if vs:
            figs = []
            for r in vs:
                rounds = sorted(b / a for a, b in zip(r["ptl_runs"], r["pytorch_runs"]))
                figs.append(f"{r['preset']} {r['speedup']:.2f}x (rounds {rounds[0]:.2f}-{rounds[-1]:.2f})")
            out.append(
                (
                    f"step >= {goal}x PyTorch, 2 threads, same run: {', '.join(group)}",
                    "; ".join(figs),
                    verdict(all(r["speedup"] >= goal for r in vs) and len(vs) == len(group)),
                )
            )
        fixed = [(p, thread_figures(pt, ab2, p)[2]) for p in group if p in QUIET_PYTORCH_2T]
        fixed = [(p, w2) for p, w2 in fixed if w2]
        if fixed:
            out.append(
                (
                    f"step >= {goal}x the issue's fixed PyTorch figures: {', '.join(p for p, _ in fixed)}",
                    "; ".join(
                        f"{p} {w2:.1f} ms vs {QUIET_PYTORCH_2T[p]} = {QUIET_PYTORCH_2T[p] / w2:.2f}x" for p, w2 in fixed
                    ),
                    verdict(all(QUIET_PYTORCH_2T[p] / w2 >= goal for p, w2 in fixed)),
                )
            )
    for t, mm in ((1, mm1), (2, mm2)):
        med = matmul_medians(mm)
        if med:
            low = sorted((v, k) for k, v in med.items())[:3]
            out.append(
                (
                    f"matmul >= 0.9 of OpenBLAS at the presets' shapes, {t} thread(s)",
                    f"{sum(v >= 0.9 for v in med.values())} of {len(med)}; lowest "
                    + ", ".join(f"{k[0]} {k[1]} {k[2]} {v:.2f}" for v, k in low),
                    verdict(all(v >= 0.9 for v in med.values())),
                )
            )
    sq = [r for r in mm2 if r["layer"] == "square2048"]
    huge = [r for r in pt if r["preset"] == "huge"]
    if sq and huge:
        peak2 = max(r["openblas_gflops"] for r in sq)
        g2 = huge[0]["gflop_per_step"] / (thread_figures(pt, ab2, "huge")[2] / 1e3)
        out.append(
            (
                "Huge end to end >= 60% of the measured sgemm peak (2 threads)",
                f"{g2:.0f} GFLOP/s of OpenBLAS's {peak2:.0f} = {g2 / peak2:.0%}",
                verdict(g2 / peak2 >= 0.6),
            )
        )
    scaling = []
    for p in [p for p in ORDER if p != "tiny" and any(r["preset"] == p for r in pt)]:
        w1, c1, w2 = thread_figures(pt, ab2, p)
        if w1 and w2:
            scaling.append((p, min(w1, c1) / w2))
    if scaling:
        out.append(
            (
                "1 -> 2 threads >= 1.8x from Small up",
                ", ".join(f"{p} {x:.2f}x" for p, x in scaling),
                verdict(all(x >= 1.8 for _, x in scaling)),
            )
        )
    mem = [
        (r["preset"], (r["peak_rss_mib"] - r["base_rss_mib"]) / r["needed_mib"])
        for r in pt
        if r["threads"] == 1 and "base_rss_mib" in r
    ]
    mem = list(dict(mem).items())
    if mem:
        out.append(
            (
                "peak memory within 1.3x of what is needed (peak RSS - RSS before the model)",
                ", ".join(f"{p} {x:.2f}x" for p, x in mem),
                verdict(all(x <= 1.3 for _, x in mem)),
            )
        )
    h = next((header(d / f) for f in FILES if header(d / f)), None)
    machine = h["machine"]["cpu"] if h else "machine not recorded"
    print(f"\n#### Targets of issue 3 ({machine}; the issue's fixed figures come from a Zen 5, cpu family 26)\n")
    print("| target | figures | |")
    print("| --- | --- | --- |")
    for target, figs, v in out:
        print(f"| {target} | {figs} | {v} |")


def ab_table(vs, threads):
    if not vs:
        return
    print(f"\n#### ptl against PyTorch, {threads} thread(s), same run (A B, B A)\n")
    print("| preset | ptl ms/step | PyTorch ms/step | speedup | ptl runs | PyTorch runs |")
    print("| --- | --- | --- | --- | --- | --- |")
    for r in vs:
        print(
            f"| {r['preset']} | {r['ptl_ms_per_step']:.1f} | {r['pytorch_ms_per_step']:.1f} | **{r['speedup']:.2f}x** | "
            f"{', '.join(f'{x:.1f}' for x in r['ptl_runs'])} | {', '.join(f'{x:.1f}' for x in r['pytorch_runs'])} |"
        )


def matmul_summary(d):
    """Per preset, the products' ratios to OpenBLAS (median of the rounds per product) at 1 and 2
    threads: their median and the lowest; then the 2048^3 products."""
    med = {t: matmul_medians(rows(d / "cpu_matmul_vs_openblas.jsonl", t)) for t in (1, 2)}
    presets = [p for p in ORDER if any(k[0] == p for t in med for k in med[t])]
    if not presets:
        return
    print("\n#### Matrix products against OpenBLAS sgemm, per preset (ratio = ptl GFLOP/s / OpenBLAS GFLOP/s)\n")
    print("| preset | products | 1 thread: median | 1 thread: lowest | 2 threads: median | 2 threads: lowest |")
    print("| --- | --- | --- | --- | --- | --- |")
    cell = lambda xs, f: f"{f(xs):.2f}" if xs else "-"
    for p in presets:
        x1 = [v for k, v in med[1].items() if k[0] == p]
        x2 = [v for k, v in med[2].items() if k[0] == p]
        print(
            f"| {p} | {max(len(x1), len(x2))} | {cell(x1, statistics.median)} | {cell(x1, min)} | "
            f"{cell(x2, statistics.median)} | {cell(x2, min)} |"
        )
    for t in (1, 2):
        sq = {}
        for r in rows(d / "cpu_matmul_vs_openblas.jsonl", t):
            if r["layer"] == "square2048":
                sq.setdefault(r["product"], []).append(r)
        if sq:
            print(
                f"\n2048³ at {t} thread(s), ptl / OpenBLAS GFLOP/s (median of the rounds): "
                + ", ".join(
                    f"{k} {statistics.median(x['ptl_gflops'] for x in g):.0f} / "
                    f"{statistics.median(x['openblas_gflops'] for x in g):.0f}"
                    for k, g in sq.items()
                )
                + "."
            )


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "dir", nargs="?", default="bench/results", help="a folder bench/run_all.sh wrote (default bench/results)"
    )
    ap.add_argument(
        "--peak",
        type=float,
        help="1-thread sgemm peak (GFLOP/s) for MFU (default: the one the run "
        "measured, cpu_threads.jsonl's peak_gflops)",
    )
    args = ap.parse_args()
    d = Path(args.dir)
    if not any((d / f).exists() for f in FILES):
        raise SystemExit(
            f"bench/table.py: {d} holds no benchmark files ({', '.join(FILES)}); give the folder bench/run_all.sh wrote"
        )
    if args.peak is None:
        # bench/run_all.sh measures the 1-thread 2048^3 product (best of three) and hands it to
        # every ptl bench of the run; the CPU decides it (Zen 5 about 180-200, Zen 4 about 100).
        args.peak = max(
            (r["peak_gflops"] for r in rows(d / "cpu_threads.jsonl") if r["threads"] == 1 and "peak_gflops" in r),
            default=182.0,
        )

    targets(d)
    ab_table(rows(d / "cpu_vs_pytorch.jsonl", 1), 1)
    ab_table(rows(d / "cpu_vs_pytorch.jsonl", 2), 2)

    pt = rows(d / "cpu_threads.jsonl")
    presets = [p for p in ORDER if any(r["preset"] == p for r in pt)]
    ab2 = rows(d / "cpu_vs_pytorch.jsonl", 2)
    # The 2-thread peak: OpenBLAS's 2048^3 sgemm measured by bench/matmul_vs_openblas --threads 2.
    sq = [r for r in rows(d / "cpu_matmul_vs_openblas.jsonl", 2) if r["layer"] == "square2048"]
    peak2 = max(r["openblas_gflops"] for r in sq) if sq else None
    if pt:
        print("\n#### ptl per preset (ptl bench)\n")
        print(
            f"1 thread: GFLOP/s and MFU from the CPU time per step, MFU against {args.peak:.0f} GFLOP/s (our 2048³ "
            "matmul, 1 thread). 2 threads: from the best wall time, MFU against "
            + (
                f"{peak2:.0f} GFLOP/s, OpenBLAS's 2048³ sgemm on 2 threads in the same run. "
                "The 2-thread time is the best of the `ptl bench` medians and of the ptl runs against "
                "PyTorch at 2 threads. 1 -> 2 compares it with the lower of the 1-thread wall and CPU times."
                if peak2
                else "-"
            )
            + "\n"
        )
        print(
            "| preset | params | tokens/step | GFLOP/step | 1 thread: best wall ms | 1 thread: CPU ms/step | GFLOP/s | "
            "MFU | 2 threads: best wall ms | GFLOP/s | MFU | 1 -> 2 | PyTorch 2 threads, quiet machine (earlier) | "
            "ptl 2 threads vs that |"
        )
        print("| --- " * 14 + "|")
        for p in presets:
            r1 = next(r for r in pt if r["preset"] == p)
            w1, c1, w2 = thread_figures(pt, ab2, p)
            g = r1["gflop_per_step"] / (c1 / 1e3)
            g2 = r1["gflop_per_step"] / (w2 / 1e3)
            q = QUIET_PYTORCH_2T.get(p)
            mfu2 = f"{g2 / peak2:.0%}" if peak2 else "-"
            print(
                f"| {p} | {r1['params']:,} | {r1['tokens_per_step']} | {r1['gflop_per_step']:.3f} | {w1:.1f} | {c1:.1f} | "
                f"{g:.0f} | {g / args.peak:.0%} | {w2:.1f} | {g2:.0f} | {mfu2} | {min(w1, c1) / w2:.2f}x | {q if q else '-'} | "
                f"{(f'{q / w2:.2f}x') if q else '-'} |"
            )
        print("\n#### Memory (each preset's own process)\n")
        print(
            "| preset | weights MiB | grads MiB | moments MiB | arena before (one slot per tensor) MiB | arena now MiB | "
            "needed MiB | peak RSS MiB | RSS / needed | RSS before the model MiB | (peak - before) / needed |"
        )
        print("| --- " * 11 + "|")
        for p in presets:
            r = next(r for r in pt if r["preset"] == p)
            print(
                f"| {p} | {r['weights_mib']:.1f} | {r['grads_mib']:.1f} | {r['moments_mib']:.1f} | "
                f"{r['activations_mib'] + r['grads_mib']:.1f} | {r['arena_mib']:.1f} | {r['needed_mib']:.1f} | "
                f"{r['peak_rss_mib']:.0f} | {r['peak_rss_mib'] / r['needed_mib']:.2f} | "
                + (
                    f"{r['base_rss_mib']:.1f} | {(r['peak_rss_mib'] - r['base_rss_mib']) / r['needed_mib']:.2f} |"
                    if "base_rss_mib" in r
                    else "- | - |"
                )
            )

    matmul_summary(d)
    for t in (1, 2):
        mm = rows(d / "cpu_matmul_vs_openblas.jsonl", t)
        if not mm:
            continue
        print(f"\n#### Matrix products against OpenBLAS sgemm (SkylakeX), {t} thread(s)\n")
        # Several rounds (bench/run_all.sh runs the benchmark PTL_BENCH_ROUNDS times): one row per
        # product with the medians, and every round's ratio.
        groups = {}
        for r in mm:
            groups.setdefault((r["preset"], r["layer"], r["product"]), []).append(r)
        n_rounds = max(len(g) for g in groups.values())
        print(
            "| preset | layer | product | M x N x K | ptl GFLOP/s | OpenBLAS GFLOP/s | ratio |"
            + (" ratio per round |" if n_rounds > 1 else "")
        )
        print("| --- | --- | --- | --- | --- | --- | --- |" + (" --- |" if n_rounds > 1 else ""))
        ratios = []
        for (preset, layer, product), g in groups.items():
            r = g[0]
            ratio = statistics.median(x["ratio"] for x in g)
            if preset != "-":
                ratios.append(ratio)
            print(
                f"| {preset} | {layer} | {product} | {r['M']}x{r['N']}x{r['K']} | "
                f"{statistics.median(x['ptl_gflops'] for x in g):.0f} | "
                f"{statistics.median(x['openblas_gflops'] for x in g):.0f} | {ratio:.2f} |"
                + (" " + ", ".join(f"{x['ratio']:.2f}" for x in g) + " |" if n_rounds > 1 else "")
            )
        print(
            f"\nOver the presets' shapes ({n_rounds} round(s), median per product): median ratio "
            f"{statistics.median(ratios):.2f}, geometric mean {statistics.geometric_mean(ratios):.2f}, "
            f"minimum {min(ratios):.2f}; {sum(x < 0.9 for x in ratios)} of {len(ratios)} below 0.9."
        )


if __name__ == "__main__":
    main()
