#!/usr/bin/env node
// Training-step speed of one WebAssembly build in Node, time-boxed (for the GPU machine's CPUs,
// next to the WebGPU run; bench/wasm.mjs is the fuller comparison against native ptl).
//
//   node --no-experimental-fetch bench/wasm_steps.mjs [--presets small,medium,...] [--build simd-threads]
//        [--threads N] [--steps 10] [--budget-s 40] [--total-s 240] [--skip behemoth]
//
// Per preset: a fresh model at the preset's spec batch on TinyShakespeare ($PTL_DATA_DIR or
// ../shared/data), 1 untimed step, then up to --steps steps or as many as fit in --budget-s
// (at least 2), ms/step = median of the engine's per-step seconds (the batch draw included, as in
// `ptl train`). A preset is skipped (and says so) when the whole run has less than --budget-s
// left, or when it is in --skip (Behemoth: 473 M parameters with AdamW moments do not fit the
// 4 GiB of wasm32). One JSON line per preset:
//   {"kind":"wasm_train","preset","build","threads","steps","ms_per_step","tokens_per_s","loss_first","loss_last"}
//   {"kind":"wasm_skipped","preset","reason"}
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { benchArgs } from './args.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const args = benchArgs(import.meta.url, ['presets', 'build', 'threads', 'steps', 'budget-s', 'total-s', 'skip']);
const presets = (args.presets ?? 'tiny,small,medium,large,xl').split(',').filter(Boolean);
const build = args.build ?? 'simd-threads';
const cores = typeof os.availableParallelism === 'function' ? os.availableParallelism() : os.cpus().length;
const threads = Number(args.threads ?? Math.min(16, cores));
const maxSteps = Number(args.steps ?? 10);
const budget = Number(args['budget-s'] ?? 40);
const total = Number(args['total-s'] ?? 240);
const skip = new Set((args.skip ?? 'behemoth').split(',').filter(Boolean));
const buildDir = process.env.PTL_WASM_BUILD_DIR ?? path.join(ROOT, 'build-wasm');
const dataDir = process.env.PTL_DATA_DIR ?? path.join(ROOT, '..', 'shared', 'data');
const corpus = fs.readFileSync(path.join(dataDir, 'tinyshakespeare.txt'));
const { loadModule, Engine } = await import(path.join(ROOT, 'web', 'engine', 'dist', 'index.js'));

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const n = s.length;
  return n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
};
const emit = (o) => console.log(JSON.stringify(o));
const t0 = performance.now();
const module = await loadModule({ buildDir, variant: build, poolSize: threads });
const env = `node ${process.versions.node}, ${os.cpus()[0]?.model ?? 'cpu'}, ${cores} cores`;
for (const preset of presets) {
  const left = total - (performance.now() - t0) / 1000;
  if (skip.has(preset)) {
    emit({ kind: 'wasm_skipped', preset, reason: 'wasm32 memory: weights, gradients and AdamW moments exceed 4 GiB' });
    continue;
  }
  if (left < budget) {
    emit({ kind: 'wasm_skipped', preset, reason: `time box: ${left.toFixed(0)} s left of --total-s ${total}` });
    continue;
  }
  const engine = await Engine.create({ preset, train: { steps: 1000 } }, module);
  await engine.setCorpus(corpus);
  const first = await engine.train(1, { stepsPerChunk: 1 });
  const est = first[0].seconds;
  const n = Math.max(2, Math.min(maxSteps, Math.floor(budget / Math.max(est, 1e-3)) - 1));
  const m = await engine.train(n, { stepsPerChunk: n });
  engine.dispose();
  const ms = median(m.map((x) => x.seconds * 1000));
  const tokens = m[0].tokens;
  emit({
    kind: 'wasm_train',
    preset,
    build,
    env,
    threads: module.build.num_threads ?? threads,
    steps: n,
    ms_per_step: +ms.toFixed(2),
    tokens_per_step: tokens,
    tokens_per_s: Math.round((tokens / ms) * 1000),
    loss_first: first[0].loss,
    loss_last: m[m.length - 1].loss,
  });
}
module.terminate();
process.exit(0);
