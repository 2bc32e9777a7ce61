#!/usr/bin/env node
// Training-step speed of the WebAssembly builds, in Node and in headless Chromium, next to native
// `ptl bench` (full width: AVX-512 here) and native128 (`ptl bench` built with -DPTL_SIMD128=ON:
// 128-bit vectors, no FMA, the ISA WebAssembly SIMD128 has), all measured in the same run.
//
//   node bench/wasm.mjs [--presets tiny,small,medium] [--builds scalar,simd,simd-threads]
//                       [--env node,chromium] [--steps 10] [--warmup 2] [--threads N]
//                       [--warmup-s 2] [--min-s 1] [--rounds 1]
//
// Prints one JSON line per preset, build and environment:
//   {"preset","build","env" (node | chromium),"threads","ms_per_step","tokens_per_s",
//    "native_ms_per_step","native128_ms_per_step","vs_native","vs_native128","loss_match","runtime"}
// vs_native / vs_native128 = native ms / wasm ms (speed relative to native: 1 = as fast).
// ms/step is the median over the timed steps of a fresh model at the preset's batch size,
// training on TinyShakespeare (the engine's own per-step time, batch draw included). Warm-up:
// at least --warmup steps and --warmup-s seconds. A fresh module starts in V8's baseline code
// (Liftoff) and compiles the hot functions with the optimising compiler on background threads;
// on a 2-core machine those threads compete with a 2-thread run (not with a 1-thread one), so
// a few warm-up steps of a small preset (Tiny: 10 ms each) measured the compiler as much as the
// engine. Timed: at least --steps steps and --min-s seconds (at most 200 steps). With
// --rounds N every preset and environment runs its builds N times, in reverse order every
// other round (A B C, C B A, ...), and ms_per_step is the median of the rounds' medians
// ("round_ms" lists them), so that a slow spell of the host does not land on one build. Native
// numbers are `ptl bench --json`'s ms_per_step (median) at the same thread count as the wasm
// build: --threads for simd-threads, 1 for the single-thread builds (scalar, simd, memory64),
// each native configuration measured once per preset. In Chromium the engine runs in a Web Worker on a cross-origin
// isolated page (tests/browser's harness), as a site would run it. loss_match is the largest
// relative difference between the wasm run's losses and the first build's in the same env.
// bench/wasm.sh builds everything first; bench/wasm_table.py turns the lines into a table + plot.
//
// Environment: PTL_WASM_BUILD_DIR (default build-wasm), PTL_NATIVE_BIN (default
// build-wasm/native/ptl), PTL_NATIVE128_BIN (default build-native128/ptl), PTL_DATA_DIR.
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const args = Object.fromEntries(
  process.argv.slice(2).reduce((acc, a, i, all) => (a.startsWith("--") ? [...acc, [a.slice(2), all[i + 1]]] : acc), []),
);
const presets = (args.presets ?? "tiny,small,medium").split(",");
const builds = (args.builds ?? "scalar,simd,simd-threads").split(",");
const envs = (args.env ?? "node").split(",");
for (const e of envs) if (e !== "node" && e !== "chromium") throw new Error(`--env: unknown environment '${e}' (node, chromium)`);
const steps = Number(args.steps ?? 10);
const warmup = Number(args.warmup ?? 2);
const warmupS = Number(args["warmup-s"] ?? 2);
const minS = Number(args["min-s"] ?? 1);
const rounds = Number(args.rounds ?? 1);
const maxSteps = 200;
const cores = typeof os.availableParallelism === "function" ? os.availableParallelism() : os.cpus().length;
const threads = Number(args.threads ?? cores);
const buildDir = process.env.PTL_WASM_BUILD_DIR ?? path.join(ROOT, "build-wasm");
const nativeBin = process.env.PTL_NATIVE_BIN ?? path.join(buildDir, "native", "ptl");
const native128Bin = process.env.PTL_NATIVE128_BIN ?? path.join(ROOT, "build-native128", "ptl");
const data = process.env.PTL_DATA_DIR
  ? path.join(process.env.PTL_DATA_DIR, "tinyshakespeare.txt")
  : path.join(ROOT, "..", "shared", "data", "tinyshakespeare.txt");
const corpus = fs.readFileSync(data);
const { loadModule, Engine } = await import(path.join(ROOT, "web", "dist", "engine", "index.js"));

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const n = s.length;
  return n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
};
const round = (x, d = 2) => (x === null || x === undefined ? null : +x.toFixed(d));

// Warm-up then timed steps (see the header), for an engine behind `train(n)` (the module in Node,
// the worker's client in Chromium: so this function is also sent to the page as text).
async function warmAndTime(train, o) {
  const all = [];
  let elapsed = 0, est = 0, warm = 0;
  while (warm < o.warmup || elapsed < o.warmupS) {
    // What is still missing of both the step count and the time, in one call.
    const n = warm === 0 ? 1 : Math.max(1, Math.min(o.maxSteps - warm, Math.max(Math.ceil((o.warmupS - elapsed) / est), o.warmup - warm)));
    const m = await train(n);
    all.push(...m);
    warm += n;
    elapsed += m.reduce((a, x) => a + x.seconds, 0);
    const s = m.map((x) => x.seconds).sort((a, b) => a - b);
    est = Math.max(s[s.length >> 1], 1e-4);
    if (warm >= o.maxSteps) break;
  }
  const timed = Math.min(o.maxSteps, Math.max(o.steps, est > 0 ? Math.ceil(o.minS / est) : 0));
  const m = await train(timed);
  return { warm, metrics: m, losses: [...all, ...m].map((x) => x.loss) };
}
const planOptions = { warmup, steps, warmupS, minS, maxSteps };

// Native figures: once per configuration and round (the same steps as the wasm run of the build
// that asked first).
const benchCache = new Map();
function ptlBench(bin, preset, nThreads, round, nSteps) {
  const key = `${bin} ${preset} ${nThreads} ${round}`;
  if (!benchCache.has(key)) benchCache.set(key, ptlBenchRun(bin, preset, nThreads, nSteps));
  return benchCache.get(key);
}
function ptlBenchRun(bin, preset, nThreads, nSteps) {
  if (!fs.existsSync(bin)) {
    console.error(`bench/wasm.mjs: ${bin} not built; its column is null`);
    return null;
  }
  // --peak-gflops skips the 2048^3 calibration product (MFU is not used here).
  const out = execFileSync(bin, ["bench", "--presets", preset, "--steps", String(nSteps), "--warmup", String(warmup),
    "--threads", String(nThreads), "--json", "--peak-gflops", "1"], { encoding: "utf8", stdio: ["ignore", "pipe", "inherit"] });
  const line = out.trim().split("\n").map((l) => JSON.parse(l)).find((r) => r.preset === preset);
  return line.ms_per_step;
}

async function nodeRun(variant, preset) {
  const module = await loadModule({ buildDir, variant, poolSize: threads });
  try {
    const engine = await Engine.create({ preset, train: { steps: 1000000 } }, module);
    await engine.setCorpus(corpus);
    const r = await warmAndTime((n) => engine.train(n, { stepsPerChunk: n }), planOptions);
    engine.dispose();
    return { ms: median(r.metrics.map((x) => x.seconds * 1000)), losses: r.losses, steps: r.metrics.length, warmup: r.warm,
      threads: module.build.num_threads ?? 1 };
  } finally {
    module.terminate();
  }
}

// Chromium: one browser and one isolated page for the whole run; a fresh worker per measurement.
let chromium = null;
async function chromiumPage() {
  if (chromium) return chromium;
  const { openEnginePage } = await import(path.join(ROOT, "tests", "browser", "helpers.mjs"));
  chromium = await openEnginePage({ isolated: true });
  return chromium;
}
async function chromiumRun(variant, preset) {
  const ctx = await chromiumPage();
  const r = await ctx.page.evaluate(
    async ({ variant, preset, threads, plan, warmAndTimeSource }) => {
      const T = window.ptlTest;
      const warmAndTime = (0, eval)(`(${warmAndTimeSource})`);
      const { client, worker, build } = await T.startEngine({ variant, poolSize: threads });
      try {
        await client.call("create", { config: { preset, train: { steps: 1000000 } } });
        if (!window.benchCorpus) window.benchCorpus = await T.fetchBytes("/data/tinyshakespeare.txt");
        await client.call("setCorpus", { corpus: window.benchCorpus });
        const r = await warmAndTime((n) => client.call("train", { steps: n, stepsPerChunk: n }), plan);
        return { ...r, threads: build.num_threads ?? 1 };
      } finally {
        worker.terminate();
      }
    },
    { variant, preset, threads, plan: planOptions, warmAndTimeSource: warmAndTime.toString() },
  );
  ctx.assertNoErrors();
  return {
    ms: median(r.metrics.map((x) => x.seconds * 1000)),
    losses: r.losses,
    steps: r.metrics.length,
    warmup: r.warm,
    threads: r.threads,
    runtime: `chromium ${ctx.browser.version()}`,
  };
}

const nodeRuntime = `node ${process.versions.node} (V8 ${process.versions.v8})`;
const machine = `${os.cpus()[0]?.model ?? "cpu"}, ${cores} cores, load ${os.loadavg()[0].toFixed(1)} at start`;
try {
  for (const preset of presets) {
    const info = JSON.parse(execFileSync(nativeBin, ["info", "--preset", preset, "--json"], { encoding: "utf8" }));
    const tokens = info.training_memory.batch * info.model_config.ctx; // per step
    for (const env of envs) {
      const available = builds.filter((build) => {
        if (fs.existsSync(path.join(buildDir, build, "ptl_engine.wasm"))) return true;
        console.error(`bench/wasm.mjs: ${build} not built (wasm/build.sh ${build}); skipped`);
        return false;
      });
      const runs = new Map(available.map((b) => [b, []]));
      for (let k = 0; k < rounds; k++) {
        const order = k % 2 ? [...available].reverse() : available;
        for (const build of order) {
          console.error(`bench/wasm.mjs: ${preset} ${env} ${build} (round ${k + 1} of ${rounds})`);
          const w = env === "node" ? await nodeRun(build, preset) : await chromiumRun(build, preset);
          // Native at the same thread count as this build (1 for the single-thread builds).
          w.native = ptlBench(nativeBin, preset, w.threads, k, w.steps);
          w.native128 = ptlBench(native128Bin, preset, w.threads, k, w.steps);
          runs.get(build).push(w);
        }
      }
      let ref = null;
      for (const build of available) {
        const rs = runs.get(build);
        const w = rs[0];
        ref ??= w.losses;
        const ms = median(rs.map((r) => r.ms));
        const nat = median(rs.map((r) => r.native).filter((x) => x));
        const nat128 = median(rs.map((r) => r.native128).filter((x) => x));
        const n = Math.min(ref.length, w.losses.length);
        const maxRel = Math.max(...w.losses.slice(0, n).map((l, i) => Math.abs(l - ref[i]) / Math.abs(ref[i])));
        console.log(JSON.stringify({
          preset, build, env, threads: w.threads,
          ms_per_step: round(ms), tokens_per_s: Math.round((1000 * tokens) / ms),
          native_ms_per_step: round(nat), native128_ms_per_step: round(nat128),
          vs_native: nat ? round(nat / ms, 3) : null, vs_native128: nat128 ? round(nat128 / ms, 3) : null,
          loss_match: maxRel, steps: w.steps, warmup_steps: w.warmup, rounds: rs.length,
          round_ms: rs.map((r) => round(r.ms)), runtime: w.runtime ?? nodeRuntime, machine,
        }));
      }
    }
  }
} finally {
  await chromium?.close();
}
process.exit(0);
