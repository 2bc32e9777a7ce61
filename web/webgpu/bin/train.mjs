#!/usr/bin/env node
// ptl-webgpu-train: `ptl train` with the steps on a GPU through WebGPU (Dawn's Node binding).
//
//   node web/webgpu/bin/train.mjs [--preset small] [--steps 1500] [--out DIR] [options]
//
// The WebAssembly engine (@posttrainllm/engine) runs the run, as it does for `ptl train` and the
// playground: the model's definition and seeded initialisation, the data loader (the batches of
// the CPU run with the same seed), the learning-rate schedule, the training loop's events
// (validation, samples, saves), the loss history, divergence checks, validation on the corpus's
// held-out split and the checkpoint. The WebGPU executor runs each step of the engine's train
// program (forward, backward, clipping, AdamW); the weights go back into the engine before it
// reads them. Validation and samples run on the engine's CPU path (WebAssembly, --threads
// workers): the engine has no way yet to hand its validation windows to another executor. Their
// time is not training time: train_s leaves it out, elapsed_s (wall clock) includes it.
//
// Writes, like `ptl train`: DIR/model.tinygpt (native `ptl sample/eval/info/train --resume` load
// it), DIR/metrics.jsonl ({"step","train_loss","lr","grad_norm","tokens_per_s","elapsed_s"} per
// step, "val_loss" on the steps followed by a validation, with "gpu_buffers" and
// "gpu_buffer_bytes" (the device's buffers alive), "rss_bytes" (the process's resident memory),
// "js_heap_bytes" and "array_buffer_bytes" (Node's heap and its ArrayBuffers, the engine's among them),
// plus "train_s": the training seconds so far, evaluation, sampling and saving left out),
// DIR/samples.txt. Progress goes to stderr; at the
// end one JSON line on stdout: {"steps","train_s","wall_s","tokens","val_loss","final_val_loss",...}
// where final_val_loss is the loss over the whole validation split (what `ptl eval` prints for
// the checkpoint; --final-eval 0 skips it).
//
// Options (ptl train's, and the train config's fields it has no flag for):
//   --preset NAME --layers N --d-model N --heads N --ctx N    the model (preset, then overrides)
//   --batch N --steps N --until N --lr X --schedule cosine|constant --warmup N --min-lr-frac X
//   --weight-decay X --beta2 X --grad-clip X --dropout P --seed N
//   --eval-every N --eval-batches N|all --sample-every N (0: never) --log-every N
//     (all: each validation over the whole split, window by window, as `ptl eval`)
//   --snapshot-every N --snapshot-from STEP (the weights alone every N steps from STEP on, as
//     DIR/snapshots/step-NNNNNN.tinygpt, for `ptl average`)
//   --data FILE (default TinyShakespeare: $PTL_DATA_DIR, else ../shared/data) --out DIR --overwrite
//   --resume CKPT (continue a run: --steps, --lr, --schedule, --eval-*, --sample-every may change)
//   --final-eval 0|1   --threads N (the engine's WebAssembly threads; default min(16, cores))
//   --wasm-dir DIR (build-wasm; $PTL_WASM_BUILD_DIR) --variant simd-threads|simd
//   --in-flight N (steps submitted ahead of the last loss read back; default 3)
//   --dawn 'opt;...' (Dawn options, e.g. enable-dawn-features=allow_unsafe_apis,disable_robustness)
// Device: a real Vulkan driver, or SwiftShader with VK_ICD_FILENAMES=/usr/lib/chromium/vk_swiftshader_icd.json.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const NAME = 'ptl-webgpu-train';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const REPO = path.resolve(HERE, '..', '..', '..');

// The engine by its package name (the workspace's link), else from the checkout next to this package.
const notFound = (e) => e?.code === 'ERR_MODULE_NOT_FOUND';
const { Engine, EngineError, loadModule } = await import('@posttrainllm/engine').catch((e) => {
  if (!notFound(e)) throw e;
  return import('../../engine/dist/index.js').catch((e2) => {
    if (!notFound(e2)) throw e2;
    console.error(`${NAME}: the engine's JavaScript is missing (web/engine/dist): npm --prefix web run build`);
    process.exit(1);
  });
});
const { WebGPUTrainer, copyToEngine, engineTensors, createNodeBackend } = await Promise.all([
  import('../dist/index.js'),
  import('../dist/node.js'),
])
  .then(([a, b]) => ({ ...a, ...b }))
  .catch((e) => {
    if (!notFound(e)) throw e;
    console.error(`${NAME}: the WebGPU backend's JavaScript is missing (web/webgpu/dist): npm --prefix web run build`);
    process.exit(1);
  });

class UsageError extends Error {}

const options = {
  preset: { type: 'string' },
  layers: { type: 'string' },
  'd-model': { type: 'string' },
  heads: { type: 'string' },
  ctx: { type: 'string' },
  batch: { type: 'string' },
  steps: { type: 'string' },
  until: { type: 'string' },
  lr: { type: 'string' },
  schedule: { type: 'string' },
  warmup: { type: 'string' },
  'min-lr-frac': { type: 'string' },
  'weight-decay': { type: 'string' },
  beta2: { type: 'string' },
  'grad-clip': { type: 'string' },
  dropout: { type: 'string' },
  seed: { type: 'string' },
  'eval-every': { type: 'string' },
  'eval-batches': { type: 'string' },
  'sample-every': { type: 'string' },
  'log-every': { type: 'string' },
  'snapshot-every': { type: 'string' },
  'snapshot-from': { type: 'string' },
  data: { type: 'string' },
  out: { type: 'string' },
  overwrite: { type: 'boolean' },
  resume: { type: 'string' },
  'final-eval': { type: 'string' },
  threads: { type: 'string' },
  'wasm-dir': { type: 'string' },
  variant: { type: 'string' },
  'in-flight': { type: 'string' },
  dawn: { type: 'string' },
  help: { type: 'boolean', short: 'h' },
};

function usage() {
  const lines = fs
    .readFileSync(fileURLToPath(import.meta.url), 'utf8')
    .split('\n')
    .slice(1);
  const head = [];
  for (const l of lines) {
    if (!l.startsWith('//')) break;
    head.push(l.replace(/^\/\/ ?/, ''));
  }
  return head.join('\n');
}

// A number option: an integer (>= min) or a real number in [min, max).
function num(args, key, { int = true, min = -Infinity, max = Infinity } = {}) {
  const v = args[key];
  if (v === undefined) return undefined;
  const x = Number(v);
  if (v.trim() === '' || !Number.isFinite(x) || (int && !Number.isInteger(x)) || x < min || x >= max)
    throw new UsageError(
      `--${key} ${v}: expected ${int ? 'an integer' : 'a number'}${min > -Infinity ? ` >= ${min}` : ''}${max < Infinity ? ` below ${max}` : ''}`,
    );
  return x;
}

function findCorpus() {
  const tried = [];
  if (process.env.PTL_DATA_DIR) tried.push(path.join(process.env.PTL_DATA_DIR, 'tinyshakespeare.txt'));
  for (let d = process.cwd(); ; d = path.dirname(d)) {
    tried.push(path.join(d, '..', 'shared', 'data', 'tinyshakespeare.txt'));
    tried.push(path.join(d, 'shared', 'data', 'tinyshakespeare.txt'));
    if (d === path.dirname(d)) break;
  }
  const found = tried.find((p) => fs.existsSync(p));
  if (!found)
    throw new UsageError(`TinyShakespeare not found (tried ${tried.join(', ')}): set PTL_DATA_DIR or pass --data`);
  return path.resolve(found);
}

function writeAtomic(file, bytes) {
  const tmp = `${file}.tmp-${process.pid}`;
  fs.writeFileSync(tmp, bytes);
  fs.renameSync(tmp, file);
}

// metrics.jsonl and samples.txt cut back to the checkpoint's step (as `ptl train --resume`).
function trimRunLogs(dir, step) {
  const metrics = path.join(dir, 'metrics.jsonl');
  if (fs.existsSync(metrics)) {
    const kept = fs
      .readFileSync(metrics, 'utf8')
      .split('\n')
      .filter((l) => {
        try {
          const j = JSON.parse(l);
          return Number.isInteger(j.step) && j.step <= step;
        } catch {
          return false;
        }
      });
    writeAtomic(metrics, kept.map((l) => l + '\n').join(''));
  }
  const samples = path.join(dir, 'samples.txt');
  if (fs.existsSync(samples)) {
    const all = fs.readFileSync(samples, 'latin1');
    const m = [...all.matchAll(/^--- step (\d+) ---$/gm)].find((x) => Number(x[1]) > step);
    if (m) writeAtomic(samples, Buffer.from(all.slice(0, m.index), 'latin1'));
  }
}

const log = (s) => process.stderr.write(s + '\n');

// What a terminal can show: control characters other than newline and tab (a barely trained model
// emits them) become U+FFFD, as `ptl train` prints its samples.
const forTerminal = (text) =>
  [...text].map((c) => ((c.charCodeAt(0) < 0x20 && c !== '\n' && c !== '\t') || c === '\x7f' ? '\ufffd' : c)).join('');

// Counts the device's buffers: every createBuffer from here on, less those destroyed. A buffer
// dropped without destroy() stays counted (its memory is the GPU's until a garbage collection).
function countBuffers(device) {
  const mem = { live: 0, bytes: 0 };
  const create = device.createBuffer.bind(device);
  device.createBuffer = (desc) => {
    const b = create(desc);
    mem.live += 1;
    mem.bytes += desc.size;
    const destroy = b.destroy.bind(b);
    let gone = false;
    b.destroy = () => {
      if (!gone) {
        gone = true;
        mem.live -= 1;
        mem.bytes -= desc.size;
      }
      destroy();
    };
    return b;
  };
  return mem;
}

async function main() {
  let parsed;
  try {
    parsed = parseArgs({ options, allowPositionals: false, strict: true });
  } catch (e) {
    throw new UsageError(e.message);
  }
  const a = parsed.values;
  if (a.help) {
    console.log(usage());
    return 0;
  }
  const resume = a.resume;
  const modelKeys = [
    'preset',
    'layers',
    'd-model',
    'heads',
    'ctx',
    'batch',
    'seed',
    'dropout',
    'weight-decay',
    'beta2',
    'grad-clip',
  ];
  if (resume) {
    const fixed = modelKeys.filter((k) => a[k] !== undefined);
    if (fixed.length)
      throw new UsageError(
        `${fixed.map((k) => `--${k}`).join(', ')}: the model, batch, seed and optimizer settings are the checkpoint's when resuming`,
      );
  }
  const dropout = num(a, 'dropout', { int: false, min: 0, max: 1 });
  const schedule = a.schedule;
  if (schedule !== undefined && schedule !== 'cosine' && schedule !== 'constant')
    throw new UsageError(`--schedule ${schedule}: expected cosine or constant`);
  // --eval-batches all: every validation over the whole split, window by window (as `ptl eval`
  // and final_val_loss), not over the run's sampled windows. Slower, but the figure of record.
  const evalWhole = a['eval-batches'] === 'all';
  // The train config's fields that may change on an existing run (ptl_update_train_config).
  const schedulePart = {
    ...(a.steps !== undefined ? { steps: num(a, 'steps', { min: 1 }) } : {}),
    ...(a.lr !== undefined ? { lr: num(a, 'lr', { int: false, min: 0 }) } : {}),
    ...(schedule !== undefined ? { schedule } : {}),
    ...(a.warmup !== undefined ? { warmup: num(a, 'warmup', { min: 0 }) } : {}),
    ...(a['min-lr-frac'] !== undefined ? { min_lr_frac: num(a, 'min-lr-frac', { int: false, min: 0 }) } : {}),
    ...(a['eval-every'] !== undefined ? { eval_every: num(a, 'eval-every', { min: 0 }) } : {}),
    ...(a['eval-batches'] !== undefined && !evalWhole ? { eval_batches: num(a, 'eval-batches', { min: 1 }) } : {}),
    ...(a['sample-every'] !== undefined ? { sample_every: num(a, 'sample-every', { min: 0 }) } : {}),
  };
  const until = num(a, 'until', { min: 1 });
  const logEvery = num(a, 'log-every', { min: 1 }) ?? 50;
  const snapshotEvery = num(a, 'snapshot-every', { min: 0 }) ?? 0;
  const snapshotFrom = num(a, 'snapshot-from', { min: 0 }) ?? 0;
  const finalEval = (a['final-eval'] ?? '1') !== '0';
  const inFlight = num(a, 'in-flight', { min: 1 }) ?? 3;
  const cores = typeof os.availableParallelism === 'function' ? os.availableParallelism() : os.cpus().length;
  const threads = num(a, 'threads', { min: 1 }) ?? Math.min(16, cores);
  const wasmDir = path.resolve(a['wasm-dir'] ?? process.env.PTL_WASM_BUILD_DIR ?? path.join(REPO, 'build-wasm'));
  const variant = a.variant ?? 'simd-threads';
  if (!fs.existsSync(path.join(wasmDir, variant, 'ptl_engine.wasm')))
    throw new UsageError(
      `no WebAssembly engine at ${path.join(wasmDir, variant)}: build it (wasm/build.sh ${variant}) or pass --wasm-dir`,
    );

  const module = await loadModule({ buildDir: wasmDir, variant, poolSize: threads });
  let engine;
  let out = a.out;
  if (resume) {
    engine = await Engine.fromCheckpoint(new Uint8Array(fs.readFileSync(resume)), module, resume);
    const change = { ...schedulePart };
    if (a.data !== undefined) change.data_path = path.resolve(a.data);
    await engine.updateTrainConfig(change);
    out ??= path.dirname(resume);
  } else {
    const model = {
      ...(a.layers !== undefined ? { n_layers: num(a, 'layers', { min: 1 }) } : {}),
      ...(a['d-model'] !== undefined ? { d_model: num(a, 'd-model', { min: 1 }) } : {}),
      ...(a.heads !== undefined ? { n_heads: num(a, 'heads', { min: 1 }) } : {}),
      ...(a.ctx !== undefined ? { ctx: num(a, 'ctx', { min: 1 }) } : {}),
    };
    // ptl train's defaults where they differ from the train config's.
    const train = {
      steps: 1500,
      lr: 3e-4,
      eval_every: 100,
      sample_every: 500,
      seed: 1337,
      ...schedulePart,
      ...(a.batch !== undefined ? { batch: num(a, 'batch', { min: 1 }) } : {}),
      ...(a.seed !== undefined ? { seed: num(a, 'seed', { min: 0 }) } : {}),
      ...(a['weight-decay'] !== undefined ? { weight_decay: num(a, 'weight-decay', { int: false, min: 0 }) } : {}),
      ...(a.beta2 !== undefined ? { beta2: num(a, 'beta2', { int: false, min: 0, max: 1 }) } : {}),
      ...(a['grad-clip'] !== undefined ? { grad_clip: num(a, 'grad-clip', { int: false, min: 0 }) } : {}),
      // Only a rate above 0 is passed: a build without dropout then still trains with the default.
      ...(dropout ? { dropout } : {}),
      data_path: path.resolve(a.data ?? findCorpus()),
    };
    try {
      engine = await Engine.create({ preset: a.preset ?? 'small', model, train }, module);
    } catch (e) {
      if (dropout && e instanceof EngineError && /dropout/.test(e.message))
        throw new UsageError(`dropout not supported by this build (the engine said: ${e.message})`);
      throw e;
    }
    if (out === undefined) {
      const t = new Date();
      const p2 = (n) => String(n).padStart(2, '0');
      out = `runs/${t.getFullYear()}${p2(t.getMonth() + 1)}${p2(t.getDate())}-${p2(t.getHours())}${p2(t.getMinutes())}${p2(t.getSeconds())}-webgpu`;
    }
  }
  let info = await engine.info();
  const tc = info.train;
  if (tc.data_path.endsWith('.jsonl'))
    throw new UsageError(`--data ${tc.data_path}: this trains on plain text, and that is SFT examples (JSONL)`);
  if (!fs.existsSync(tc.data_path))
    throw new UsageError(`the training text ${tc.data_path} does not exist${resume ? ': pass --data FILE' : ''}`);
  const corpus = new Uint8Array(fs.readFileSync(tc.data_path));
  await engine.setCorpus(corpus);
  info = await engine.info();

  fs.mkdirSync(out, { recursive: true });
  const ckptPath = path.join(out, 'model.tinygpt');
  if (!resume && !a.overwrite && fs.existsSync(ckptPath))
    throw new UsageError(
      `${out} already holds a run (${ckptPath}): continue it with --resume ${ckptPath}, choose another --out, or pass --overwrite`,
    );
  if (resume) trimRunLogs(out, info.step);
  const metrics = fs.openSync(path.join(out, 'metrics.jsonl'), resume ? 'a' : 'w');
  const samples = fs.openSync(path.join(out, 'samples.txt'), resume ? 'a' : 'w');

  const first = info.step;
  const last = until ? Math.min(until, tc.steps) : tc.steps;
  if (last <= first)
    throw new UsageError(
      `nothing to do: the run is at step ${first} of ${tc.steps}${until ? ` (--until ${until})` : ''}`,
    );
  const mc = info.model;
  // The GPU: the engine's weights (and moments, when resuming) and its train program.
  gpu = await createNodeBackend(a.dawn ? a.dawn.split(';') : []);
  const gpuMemory = countBuffers(gpu.device);
  const be = gpu.backend;
  be.loadWeights(engineTensors(engine));
  let exec;
  try {
    exec = await be.load(JSON.stringify(await engine.exportProgram('train')));
  } catch (e) {
    if (tc.dropout > 0) throw new UsageError(`dropout not supported by this build's WebGPU executor: ${e.message}`);
    throw e;
  }
  const tokensPerStep = tc.batch * mc.ctx;

  log(
    `${NAME}: ${mc.n_layers} layers, d ${mc.d_model}, ${mc.n_heads} heads, ctx ${mc.ctx} (${info.param_count} parameters), ` +
      `batch ${tc.batch}, ${tc.schedule} lr ${tc.lr.toExponential(2)}, steps ${first + 1}..${last}` +
      (tc.dropout ? `, dropout ${tc.dropout}` : ''),
  );
  log(`data: ${tc.data_path} (${info.corpus.train_bytes} train / ${info.corpus.val_bytes} val bytes)`);
  const valText = corpus.subarray(corpus.length - info.corpus.val_bytes);
  log(
    `gpu: ${gpu.description}; engine: ${engine.build.variant} ${engine.build.version}, ${engine.build.num_threads} threads`,
  );
  log(`out: ${out}`);

  // ---- the steps' losses, recorded by the engine in step order as they come back -------------
  let failure = null;
  let recorded = first;
  const arrived = new Map();
  const lrs = new Map();
  const evalSteps = new Set();
  const held = new Map(); // metrics lines waiting for their step's validation
  const waiters = [];
  let trainS = 0; // seconds of training steps (pauses for validation, samples and saves left out)
  let lastT = 0;
  let t0 = 0;
  let emaTps = 0;
  let lastLoss = NaN;
  const writeLine = (m) => fs.writeSync(metrics, JSON.stringify(m) + '\n');
  const wake = () => {
    for (let i = waiters.length - 1; i >= 0; i--)
      if (failure || recorded >= waiters[i].step) {
        const w = waiters.splice(i, 1)[0];
        if (failure) w.reject(failure);
        else w.resolve();
      }
  };
  const fail = (e) => {
    failure ??= e;
    wake();
  };
  const record = (r) => {
    const now = performance.now();
    const seconds = (now - lastT) / 1000;
    lastT = now;
    try {
      engine.recordStep({ step: r.step, loss: r.loss, gradNorm: r.gradNorm, seconds });
    } catch (e) {
      fail(e);
      return false;
    }
    trainS += seconds;
    const tps = seconds > 0 ? tokensPerStep / seconds : 0;
    emaTps = emaTps === 0 ? tps : 0.9 * emaTps + 0.1 * tps;
    lastLoss = r.loss;
    const m = {
      step: r.step,
      train_loss: r.loss,
      lr: lrs.get(r.step) ?? 0,
      grad_norm: r.gradNorm,
      tokens_per_s: tps,
      elapsed_s: (now - t0) / 1000,
      train_s: trainS,
    };
    lrs.delete(r.step);
    if (evalSteps.has(r.step)) held.set(r.step, m);
    else writeLine(m);
    if (r.step % logEvery === 0 || r.step === last)
      log(
        `step ${r.step}/${last}: loss ${r.loss.toFixed(4)}, lr ${m.lr.toExponential(2)}, ${Math.round(emaTps)} tokens/s, ` +
          `${trainS.toFixed(1)} s training (${m.elapsed_s.toFixed(1)} s wall)`,
      );
    return true;
  };
  const onLoss = (r) => {
    if (failure) return;
    arrived.set(r.step, r);
    while (!failure && arrived.has(recorded + 1)) {
      const next = arrived.get(recorded + 1);
      arrived.delete(recorded + 1);
      if (!record(next)) break;
      recorded++;
    }
    wake();
  };
  const recordedBy = (step) =>
    failure
      ? Promise.reject(failure)
      : recorded >= step
        ? Promise.resolve()
        : new Promise((resolve, reject) => waiters.push({ step, resolve, reject }));
  // A readback that fails is a device error: it stops the run like a diverged step.
  process.on('unhandledRejection', (e) => fail(e));

  const trainer = new WebGPUTrainer(exec, { readEvery: 1, onLoss, seed: tc.seed }, first); // the seed draws the dropout masks
  const flush = async () => {
    try {
      await trainer.flush();
    } catch (e) {
      fail(e);
    }
    if (failure) throw failure;
  };
  let synced = true;
  const sync = async () => {
    if (synced) return;
    await copyToEngine(engine, be, trainer.step);
    synced = true;
  };
  const save = async () => {
    await sync();
    writeAtomic(ckptPath, await engine.exportCheckpoint({ optimizer: true }));
    savedStep = trainer.step;
  };
  let savedStep = resume ? first : null;
  let lastVal = null;
  let evalS = 0;
  const act = async (step, ev) => {
    if (ev.evaluate) {
      await sync();
      const t = performance.now();
      const v = evalWhole ? await engine.evaluate(valText) : await engine.validationLoss();
      evalS += (performance.now() - t) / 1000;
      lastVal = v.loss;
      const m = held.get(step) ?? { step };
      held.delete(step);
      m.val_loss = v.loss;
      // Memory over long runs (docs/reliability.md): the GPU buffers alive and the process's;
      // under `node --expose-gc` after a collection, so that what is read is what is alive.
      globalThis.gc?.();
      m.gpu_buffers = gpuMemory.live;
      m.gpu_buffer_bytes = gpuMemory.bytes;
      const mu = process.memoryUsage();
      m.rss_bytes = mu.rss;
      m.js_heap_bytes = mu.heapUsed;
      m.array_buffer_bytes = mu.arrayBuffers; // the engine's WebAssembly memory among them
      writeLine(m);
      log(
        `step ${step}: train loss ${lastLoss.toFixed(4)}, val loss ${v.loss.toFixed(4)} ` +
          `(perplexity ${v.perplexity.toFixed(2)}, ${v.bits_per_byte.toFixed(3)} bits/byte)`,
      );
    }
    if (ev.sample) {
      await sync();
      const r = await engine.generate('', { maxTokens: 200, temperature: 0.8, seed: tc.seed + step });
      fs.writeSync(samples, `--- step ${step} ---\n`);
      fs.writeSync(samples, r.tokens);
      fs.writeSync(samples, '\n');
      log(`--- sample at step ${step} ---\n${forTerminal(r.text)}\n---`);
    }
    if (ev.save) await save();
    if (snapshotDue(step)) {
      await sync();
      const dir = path.join(out, 'snapshots');
      fs.mkdirSync(dir, { recursive: true });
      writeAtomic(
        path.join(dir, `step-${String(step).padStart(6, '0')}.tinygpt`),
        await engine.exportCheckpoint({ optimizer: false }),
      );
    }
  };
  function snapshotDue(step) {
    return snapshotEvery > 0 && step >= snapshotFrom && step % snapshotEvery === 0;
  }

  let interrupted = false;
  process.on('SIGINT', () => {
    interrupted = true;
  });

  t0 = performance.now();
  lastT = t0;
  let step = first;
  try {
    while (step < last && !interrupted) {
      const b = await engine.nextBatch();
      lrs.set(b.step, b.lr);
      trainer.trainStep(b.tokens, b.targets, b.lr);
      synced = false;
      step = trainer.step;
      const ev = engine.eventsAfter(step);
      const stop = step === last && step < tc.steps; // --until: validate and save where it stops
      if (ev.evaluate || ev.sample || ev.save || stop || snapshotDue(step)) {
        if (ev.evaluate || stop) evalSteps.add(step);
        await flush(); // every loss up to this step recorded (the validation's history point carries it)
        await act(step, stop ? { ...ev, evaluate: true, save: true } : ev);
        lastT = performance.now(); // the pause is not the next step's time
      } else if (step - inFlight > recorded) await recordedBy(step - inFlight);
      else if (failure) throw failure;
      if (step % 64 === 0) await new Promise((r) => setImmediate(r)); // lets SIGINT in
    }
    await flush();
    if (interrupted) {
      await save();
      log(`interrupted at step ${trainer.step}; saved ${ckptPath}. Continue with: --resume ${ckptPath}`);
    }
  } catch (e) {
    const where =
      savedStep !== null
        ? `the last good checkpoint is ${savedStep === first && resume ? resume : ckptPath} (step ${savedStep})`
        : 'no checkpoint was written';
    // The engine's divergence message suggests a lower learning rate; here that is --lr.
    const msg = (e instanceof Error ? e.message : String(e)).replace(
      '(try a lower learning rate)',
      '(try a lower --lr)',
    );
    throw new Error(`${msg}; ${where}`, { cause: e });
  }
  const wallS = (performance.now() - t0) / 1000;
  for (const m of held.values()) writeLine(m);
  fs.closeSync(metrics);
  fs.closeSync(samples);

  const done = trainer.step - first;
  const result = {
    steps: trainer.step,
    steps_run: done,
    train_s: trainS,
    eval_s: evalS,
    wall_s: wallS,
    tokens: done * tokensPerStep,
    tokens_per_s: trainS > 0 ? (done * tokensPerStep) / trainS : 0,
    train_loss: lastLoss,
    val_loss: lastVal,
    checkpoint: ckptPath,
    adapter: gpu.description,
    engine: `${engine.build.variant} ${engine.build.version}`,
  };
  if (finalEval && !interrupted) {
    // The whole validation split, window by window (the engine's evaluate_text, as `ptl eval`).
    await sync();
    const t = performance.now();
    const v = await engine.evaluate(valText);
    result.final_val_loss = v.loss;
    result.final_eval_s = (performance.now() - t) / 1000;
    log(`validation split (as ptl eval): loss ${v.loss.toFixed(6)} over ${v.tokens} tokens`);
  }
  log(
    `done: ${trainer.step} steps, ${trainS.toFixed(1)} s training (${wallS.toFixed(1)} s wall, ${evalS.toFixed(1)} s validating), ` +
      `${result.tokens} tokens (${Math.round(result.tokens_per_s)} tokens/s). Checkpoint: ${ckptPath}`,
  );
  console.log(JSON.stringify(result));
  exec.destroy();
  engine.dispose();
  module.terminate();
  return interrupted ? 130 : 0;
}

// Dawn's Node binding aborts at process exit while a device is alive.
let gpu = null;
function closeGpu() {
  if (!gpu) return;
  gpu.backend.destroy();
  gpu.device.destroy();
  gpu = null;
}

main().then(
  (code) => {
    closeGpu();
    process.exit(code);
  },
  (e) => {
    closeGpu();
    log(`${NAME}: ${e instanceof UsageError || e instanceof EngineError ? '' : 'error: '}${e.message ?? e}`);
    process.exit(e instanceof UsageError ? 2 : 1);
  },
);
