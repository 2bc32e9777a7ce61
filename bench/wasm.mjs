#!/usr/bin/env node
// Training-step speed of the WebAssembly builds in Node, next to native `ptl`.
//
//   node bench/wasm.mjs [--presets tiny,small,medium] [--builds scalar,simd,simd-threads]
//                       [--steps 10] [--warmup 2] [--threads N]
//
// Prints one JSON line per preset and build:
//   {"preset","build","env","threads","ms_per_step","native_ms_per_step","ratio","loss_match"}
// ms/step is the median over the timed steps of a fresh model at the preset's batch size,
// training on TinyShakespeare (the batch draw included, as in `ptl train`). Native ms/step comes
// from `ptl train` over the same steps (its metrics.jsonl tokens_per_s). Both sides use the same
// number of threads (default: all cores). bench/wasm.sh builds what is needed first.
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
const steps = Number(args.steps ?? 10);
const warmup = Number(args.warmup ?? 2);
const cores = typeof os.availableParallelism === "function" ? os.availableParallelism() : os.cpus().length;
const threads = Number(args.threads ?? cores);
const buildDir = process.env.PTL_WASM_BUILD_DIR ?? path.join(ROOT, "build-wasm");
const nativeBin = process.env.PTL_NATIVE_BIN ?? path.join(buildDir, "native", "ptl");
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

function native(preset) {
  const info = JSON.parse(execFileSync(nativeBin, ["info", "--preset", preset, "--json"], { encoding: "utf8" }));
  const tokens = info.training_memory.batch * info.model_config.ctx; // per step
  const out = fs.mkdtempSync(path.join(os.tmpdir(), "ptl-bench-"));
  try {
    execFileSync(nativeBin, ["train", "--preset", preset, "--steps", String(warmup + steps), "--data", data, "--eval-every", "100000",
      "--sample-every", "0", "--out", out], { stdio: "ignore", env: { ...process.env, PTL_THREADS: String(threads) } });
    const m = fs.readFileSync(path.join(out, "metrics.jsonl"), "utf8").trim().split("\n").map((l) => JSON.parse(l));
    return { ms: median(m.slice(warmup).map((x) => (1000 * tokens) / x.tokens_per_s)), losses: m.map((x) => x.train_loss) };
  } finally {
    fs.rmSync(out, { recursive: true, force: true });
  }
}

async function wasm(variant, preset) {
  const module = await loadModule({ buildDir, variant, poolSize: threads });
  try {
    const engine = await Engine.create({ preset, train: { steps: warmup + steps } }, module);
    await engine.setCorpus(corpus);
    const m = await engine.train(warmup + steps, { stepsPerChunk: warmup + steps });
    engine.dispose();
    return { ms: median(m.slice(warmup).map((x) => x.seconds * 1000)), losses: m.map((x) => x.loss), threads: module.build.num_threads ?? 1 };
  } finally {
    module.terminate();
  }
}

const env = `node ${process.versions.node} (V8 ${process.versions.v8}), ${os.cpus()[0]?.model ?? "cpu"}, ${cores} cores`;
for (const preset of presets) {
  const nat = native(preset);
  for (const build of builds) {
    if (!fs.existsSync(path.join(buildDir, build, "ptl_engine.wasm"))) {
      console.error(`bench/wasm.mjs: ${build} not built (wasm/build.sh ${build}); skipped`);
      continue;
    }
    const w = await wasm(build, preset);
    const maxRel = Math.max(...w.losses.map((l, i) => Math.abs(l - nat.losses[i]) / Math.abs(nat.losses[i])));
    console.log(JSON.stringify({
      preset, build, env, threads: w.threads, ms_per_step: +w.ms.toFixed(2), native_ms_per_step: +nat.ms.toFixed(2),
      ratio: +(w.ms / nat.ms).toFixed(2), loss_match: maxRel,
    }));
  }
}
process.exit(0);
