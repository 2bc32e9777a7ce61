#!/usr/bin/env node
// Two WebAssembly builds of the engine in one Node process, trained alternately, for an A/B of
// a change whose effect is smaller than this host's noise between processes (docs/lessons.md,
// "Compare variants inside one process, in random order").
//
//   node --no-experimental-fetch bench/wasm_ab.mjs --a DIR --b DIR [--preset tiny] [--variant simd-threads]
//        [--variant-b V] [--threads 2] [--threads-b N] [--rounds 16] [--steps N] [--warmup-s 4]
//
// DIR is a build directory as wasm/build.sh writes it (DIR/<variant>/ptl_engine.js); copy one
// aside (cp -r build-wasm /tmp/before) before rebuilding. Each side gets its own module (its own
// worker pool) and a fresh model of the preset on TinyShakespeare ($PTL_DATA_DIR or
// ../shared/data). After --warmup-s seconds of steps on both, every round trains --steps steps
// (default 20 on Tiny, 5 otherwise) on each side, in a random order, with Engine.profile on.
// Prints per side the median ms/step over all timed steps and the median per-op ms/step over
// the rounds (largest six), one line each. --variant-b and --threads-b give side B its own
// variant and thread count: with --a and --b the same build, that is each op's speed-up from more
// threads (or from one variant to another) measured in one process. Then every op's ms/step on
// both sides and their ratio, A over B.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { benchArgs } from './args.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const args = benchArgs(import.meta.url, [
  'a',
  'b',
  'preset',
  'rounds',
  'steps',
  'threads',
  'threads-b',
  'variant',
  'variant-b',
  'warmup-s',
]);
if (!args.a || !args.b) {
  console.error('bench/wasm_ab.mjs: --a DIR and --b DIR are required (see --help)');
  process.exit(2);
}
const preset = args.preset ?? 'tiny';
const variant = args.variant ?? 'simd-threads';
const threads = Number(args.threads ?? (variant.includes('threads') ? 2 : 1));
const threadCounts = [threads, Number(args['threads-b'] ?? threads)];
const variants = [variant, args['variant-b'] ?? variant];
const rounds = Number(args.rounds ?? 16);
const steps = Number(args.steps ?? (preset === 'tiny' ? 20 : 5));
const warmupS = Number(args['warmup-s'] ?? 4);
for (const [i, dir] of [args.a, args.b].entries())
  if (!fs.existsSync(path.join(dir, variants[i], 'ptl_engine.js'))) {
    console.error(`bench/wasm_ab.mjs: no ${variants[i]} build in ${dir}`);
    process.exit(1);
  }
const dataDir = process.env.PTL_DATA_DIR ?? path.join(ROOT, '..', 'shared', 'data');
const corpus = fs.readFileSync(path.join(dataDir, 'tinyshakespeare.txt'));
const { loadModule, Engine } = await import(path.join(ROOT, 'web', 'engine', 'dist', 'index.js'));

const sides = [];
for (const [i, dir] of [args.a, args.b].entries()) {
  const module = await loadModule({ buildDir: dir, variant: variants[i], poolSize: threadCounts[i] });
  const engine = await Engine.create({ preset, train: { steps: 1000000 } }, module);
  await engine.setCorpus(corpus);
  sides.push({ dir, variant: variants[i], threads: threadCounts[i], module, engine, ms: [], ops: {} });
}
const t0 = performance.now();
while (performance.now() - t0 < warmupS * 1000)
  for (const s of sides) await s.engine.train(steps, { stepsPerChunk: steps });
for (let r = 0; r < rounds; r++) {
  for (const i of Math.random() < 0.5 ? [0, 1] : [1, 0]) {
    const s = sides[i];
    await s.engine.profile(true);
    const m = await s.engine.train(steps, { stepsPerChunk: steps });
    const p = await s.engine.profile(false);
    for (const [k, v] of Object.entries(p)) (s.ops[k] ??= []).push((v * 1000) / steps);
    s.ms.push(...m.map((x) => x.seconds * 1000));
  }
}
const median = (xs) => {
  const a = [...xs].sort((x, y) => x - y);
  const n = a.length;
  return n % 2 ? a[(n - 1) / 2] : (a[n / 2 - 1] + a[n / 2]) / 2;
};
for (const s of sides) {
  const top = Object.entries(s.ops)
    .map(([k, v]) => [k, median(v)])
    .sort((a, b) => b[1] - a[1])
    .slice(0, 6);
  console.log(
    `${s.dir} ${s.variant} ${s.threads}t ${preset}: ${median(s.ms).toFixed(2)} ms/step | ${top.map(([k, v]) => `${k} ${v.toFixed(3)}`).join(', ')}`,
  );
}
{
  const [a, b] = sides;
  const rows = Object.keys(a.ops)
    .map((k) => [k, median(a.ops[k]), median(b.ops[k] ?? [NaN])])
    .sort((x, y) => y[1] - x[1]);
  console.log(
    `per op, ms/step of ${a.variant} ${a.threads}t / ${b.variant} ${b.threads}t = ratio (step ${(median(a.ms) / median(b.ms)).toFixed(2)}x):`,
  );
  for (const [k, x, y] of rows)
    console.log(`  ${k.padEnd(24)} ${x.toFixed(3).padStart(9)} ${y.toFixed(3).padStart(9)}  ${(x / y).toFixed(2)}x`);
}
for (const s of sides) {
  s.engine.dispose();
  s.module.terminate();
}
process.exit(0);
