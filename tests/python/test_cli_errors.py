"""The project's other command-line tools fail cleanly on bad input: one line naming the problem,
a non-zero exit, no traceback, and nothing written or measured first. The PyTorch reference's
train and sample, the benchmark drivers and the data scripts (the engine's `ptl` has its own
tests in tests/test_cli.cpp).

Environment: PTL_BUILD_DIR (default <repo>/build), PTL_DATA_DIR (default <repo>/../shared/data).
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
from ptl_cli import PTL  # noqa: E402

PY = sys.executable


def run(*cmd, cwd=REPO, env=None):
    return subprocess.run(
        [str(c) for c in cmd], cwd=cwd, capture_output=True, text=True, timeout=120, env={**os.environ, **(env or {})}
    )


def clean_error(r, phrase):
    assert r.returncode != 0, r.stdout
    assert "Traceback" not in r.stderr, r.stderr
    assert phrase in r.stderr, r.stderr


@pytest.fixture
def corpus(tmp_path):
    p = tmp_path / "t.txt"
    p.write_bytes(b"the king and queen of a house shall speak to thee, my lord.\n" * 100)
    return p


def test_python_ref_train_refuses_bad_settings_before_training(tmp_path, corpus):
    out = tmp_path / "m.tinygpt"
    base = ["-m", "python_ref.train", "--data", corpus, "--out", out]
    clean_error(run(PY, *base, "--preset", "nope"), "unknown preset 'nope' (choose one of: tiny")
    clean_error(run(PY, *base, "--preset", "tiny", "--steps", "0"), "--steps must be at least 1, got 0")
    clean_error(run(PY, *base, "--preset", "tiny", "--batch", "-2"), "--batch must be at least 1, got -2")
    clean_error(run(PY, *base, "--preset", "tiny", "--lr", "-1"), "--lr must be positive")
    clean_error(run(PY, *base, "--preset", "tiny", "--eval-batches", "0"), "--eval-batches must be at least 1")
    clean_error(run(PY, *base, "--preset", "tiny", "--resume"), "--resume continues a checkpoint: give it with --init")
    clean_error(
        run(PY, "-m", "python_ref.train", "--preset", "tiny", "--data", corpus, "--out", tmp_path / "no" / "m.tinygpt"),
        "its folder does not exist",
    )
    short = tmp_path / "short.txt"
    short.write_bytes(b"abc" * 100)  # the validation split (30 bytes) holds no 33-byte window
    clean_error(
        run(PY, "-m", "python_ref.train", "--preset", "tiny", "--data", short, "--out", out),
        "corpus too small: its validation split has 30 bytes",
    )
    clean_error(
        run(PY, "-m", "python_ref.train", "--init", tmp_path / "missing.tinygpt", "--data", corpus, "--out", out),
        "No such file",
    )
    assert not out.exists() and not list(tmp_path.glob("*.tmp-*"))


@pytest.mark.skipif(not PTL.exists(), reason=f"{PTL} not built")
def test_python_ref_resume_keeps_the_runs_settings(tmp_path, corpus):
    r = run(
        PTL,
        "train",
        "--preset",
        "tiny",
        "--data",
        corpus,
        "--steps",
        6,
        "--lr",
        "1e-3",
        "--batch",
        4,
        "--schedule",
        "constant",
        "--eval-every",
        3,
        "--sample-every",
        0,
        "--out",
        tmp_path / "run",
    )
    assert r.returncode == 0, r.stderr
    ckpt = tmp_path / "run" / "model.tinygpt"
    clean_error(
        run(
            PY,
            "-m",
            "python_ref.train",
            "--init",
            ckpt,
            "--resume",
            "--data",
            corpus,
            "--steps",
            4,
            "--out",
            tmp_path / "r.tinygpt",
        ),
        "is at step 6; --steps (the run's total) must be above it",
    )
    r = run(
        PY,
        "-m",
        "python_ref.train",
        "--init",
        ckpt,
        "--resume",
        "--data",
        corpus,
        "--steps",
        8,
        "--out",
        tmp_path / "r.tinygpt",
    )
    assert r.returncode == 0, r.stderr
    assert "batch 4 x 1" in r.stdout
    info = run(PTL, "info", tmp_path / "r.tinygpt", "--json")
    import json

    j = json.loads(info.stdout)
    assert (j["step"], j["train_config"]["batch"], j["train_config"]["lr"], j["train_config"]["schedule"]) == (
        8,
        4,
        1e-3,
        "constant",
    )


@pytest.mark.skipif(not PTL.exists(), reason=f"{PTL} not built")
def test_python_ref_sample_refuses_bad_options(tmp_path, corpus):
    assert run(PTL, "init", "--preset", "tiny", "--out", tmp_path / "m.tinygpt").returncode == 0
    ckpt = tmp_path / "m.tinygpt"
    for opts, phrase in (
        (["--temperature", "-1"], "--temperature must be 0 (greedy) or positive"),
        (["--top-k", "-5"], "--top-k must be 0 (off) or positive"),
        (["--top-p", "0"], "--top-p must be in (0, 1]"),
        (["--max-tokens", "-3"], "--max-tokens must be at least 0"),
    ):
        clean_error(run(PY, "-m", "python_ref.sample", ckpt, *opts), phrase)
    (tmp_path / "text.tinygpt").write_text("hello")
    clean_error(run(PY, "-m", "python_ref.sample", tmp_path / "text.tinygpt"), "too short to be a checkpoint")


@pytest.mark.skipif(not PTL.exists(), reason=f"{PTL} not built")
def test_bench_drivers_check_arguments_before_measuring(tmp_path):
    out = tmp_path / "bench_out"
    r = run("bash", "bench/run_all.sh", "tiny,nope", env={"PTL": str(PTL), "PTL_BENCH_OUT": str(out)})
    clean_error(r, "bench/run_all.sh: unknown preset 'nope'")
    assert not out.exists(), "run_all.sh wrote its output folder before checking the presets"
    clean_error(run("bash", "bench/gpu_run.sh", "bogus", tmp_path / "g"), "the first argument is the mode")
    assert not (tmp_path / "g").exists()
    clean_error(run(PY, "bench/cpu_vs_pytorch", "--ptl", PTL, "--presets", "tiny,nope"), "unknown preset 'nope'")
    clean_error(run(PY, "bench/cpu_vs_pytorch", "--ptl", PTL, "--rounds", "0"), "--rounds must be at least 1")
    clean_error(run(PY, "bench/table.py", tmp_path / "nothing"), "holds no benchmark files")
    clean_error(
        run(PY, "scripts/make_sft_task.py", "--task", "add", "--test", "9000", "--out-dir", tmp_path / "s"),
        "more than half of the 8100 distinct add prompts",
    )
    if shutil.which("node"):
        for script in ("wasm.mjs", "wasm_ab.mjs", "wasm_steps.mjs", "webgpu_fma_peak.mjs"):
            clean_error(run("node", f"bench/{script}", "--bogus", "1"), "unknown option '--bogus'")
        # wasm.sh checks the options before its builds (minutes): this fails at once.
        clean_error(run("bash", "bench/wasm.sh", "--presets", "nope"), "unknown preset 'nope'")
