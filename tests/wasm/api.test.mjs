// The TypeScript layer: build selection, the memory estimate, the worker protocol, and the
// smaller C API paths (info, update of the schedule, validation, multiple trainers).
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { Worker } from 'node:worker_threads';

import {
  BUILD_DIR,
  Engine,
  EngineClient,
  EngineError,
  ROOT,
  VARIANT,
  dataFile,
  detectCapabilities,
  estimateStateBytes,
  load,
  ptl,
  selectBuild,
} from './helpers.mjs';

let module;
before(async () => {
  module = await load();
});
after(() => module?.terminate());

const base = {
  simd: true,
  threads: true,
  memory64: true,
  crossOriginIsolated: true,
  node: false,
  hardwareConcurrency: 8,
};
const small = { n_layers: 3, d_model: 96, n_heads: 3, ctx: 64 };
const behemoth = { n_layers: 24, d_model: 1280, n_heads: 20, ctx: 512 };

test('selectBuild: SIMD, threads only when cross-origin isolated, Memory64 only for > 2 GiB', () => {
  assert.equal(selectBuild({ model: small, batch: 16 }, base).variant, 'simd-threads');
  assert.equal(selectBuild({ model: small, batch: 16 }, base).threads, 8);
  const noCoi = selectBuild({ model: small }, { ...base, threads: false, crossOriginIsolated: false });
  assert.equal(noCoi.variant, 'simd');
  assert.match(noCoi.reason, /cross-origin isolated/);
  assert.equal(noCoi.threads, 1);
  const noSimd = selectBuild({ model: small }, { ...base, simd: false, threads: false });
  assert.equal(noSimd.variant, 'scalar');
  assert.match(noSimd.reason, /SIMD/);
  const big = selectBuild({ model: behemoth, batch: 1 }, base);
  assert.equal(big.variant, 'memory64');
  assert.ok(big.stateBytes > 2 * 1024 ** 3);
  const big32 = selectBuild({ model: behemoth, batch: 1 }, { ...base, memory64: false });
  assert.equal(big32.variant, 'simd-threads');
  assert.match(big32.reason, /Memory64 is not supported here.*may not fit/);
  assert.equal(selectBuild({ model: small }, base).variant, 'simd-threads', 'small models never pick Memory64');
  assert.equal(selectBuild({ stateBytes: 3 * 1024 ** 3, available: ['simd'] }, base).variant, 'simd');
});

test('detectCapabilities in Node: SIMD and threads; the choice for Small is simd-threads', () => {
  const caps = detectCapabilities();
  assert.equal(caps.node, true);
  assert.equal(caps.simd, true);
  assert.equal(caps.threads, true);
  const choice = selectBuild({ model: small, batch: 16 });
  console.log(`# ${choice.variant}: ${choice.reason}`);
  assert.equal(choice.variant, 'simd-threads');
});

test("estimateStateBytes covers native ptl's training-memory count for every preset", () => {
  for (const preset of ['tiny', 'small', 'medium', 'large', 'xl', 'huge', 'massive', 'mega', 'behemoth']) {
    const info = JSON.parse(ptl(['info', '--preset', preset, '--json']));
    const est = estimateStateBytes(info.model_config, info.training_memory.batch);
    const need = info.training_memory.total_bytes;
    assert.ok(est >= need, `${preset}: estimate ${est} < native ${need}`);
    assert.ok(est <= 2 * need + 64 * 1024 * 1024, `${preset}: estimate ${est} far above native ${need}`);
  }
});

test(`${VARIANT}: build info, info, schedule updates, validation, two trainers in one module`, async () => {
  assert.equal(module.build.variant, VARIANT);
  assert.equal(module.build.simd, VARIANT === 'simd' || VARIANT === 'simd-threads');
  assert.equal(module.build.threads, VARIANT === 'simd-threads');
  assert.equal(module.build.memory64, VARIANT === 'memory64');
  const a = await Engine.create({ preset: 'tiny', train: { steps: 10, seed: 3 } }, module);
  const b = await Engine.create({ preset: 'tiny', train: { steps: 10, seed: 3 } }, module);
  try {
    const text = fs.readFileSync(dataFile()).subarray(0, 100000);
    await a.setCorpus(text);
    await b.setCorpus(text);
    const ma = await a.train(3);
    const mb = await b.train(3);
    assert.deepEqual(
      ma.map((m) => m.loss),
      mb.map((m) => m.loss),
      'same seed, same losses',
    );
    await a.updateTrainConfig({ steps: 20, lr: 1e-3 });
    const info = await a.info();
    assert.equal(info.train.steps, 20);
    assert.equal(info.train.lr, 1e-3);
    assert.equal(info.corpus.train_bytes, 90000);
    const v = await a.validationLoss();
    assert.ok(v.loss > 0 && v.tokens > 0 && Math.abs(v.perplexity - Math.exp(v.loss)) < 1e-9);
    const e = await a.evaluate(text.subarray(0, 1000));
    assert.equal(e.tokens, 999);
  } finally {
    a.dispose();
    b.dispose();
  }
});

test(`${VARIANT}: profile gives the per-op time of the steps trained while it is on`, async () => {
  const e = await Engine.create({ preset: 'tiny', train: { steps: 10 } }, module);
  try {
    await e.setCorpus(fs.readFileSync(dataFile()).subarray(0, 100000));
    await e.train(1);
    assert.deepEqual(await e.profile(true), {}, 'nothing recorded before profiling starts');
    const m = await e.train(2);
    const ops = await e.profile(false);
    for (const op of [
      'linear',
      'linear_backward',
      'attention',
      'attention_backward',
      'layernorm',
      'cross_entropy_tied', // with its backward: the executor runs the pair as one call
      'adamw',
    ])
      assert.ok(ops[op] > 0, `${op} timed`);
    const total = Object.values(ops).reduce((a, b) => a + b, 0);
    const steps = m.reduce((a, x) => a + x.seconds, 0);
    assert.ok(total > 0.3 * steps && total <= steps * 1.05, `ops ${total} s within the steps' ${steps} s`);
    await e.train(1);
    assert.deepEqual(await e.profile(false), ops, 'off: nothing more recorded');
  } finally {
    e.dispose();
  }
});

test(`${VARIANT}: the heap is reserved when a model is created and does not grow while training`, async () => {
  for (const preset of ['small', 'medium']) {
    const e = await Engine.create({ preset }, module);
    try {
      await e.setCorpus(fs.readFileSync(dataFile()).subarray(0, 200000));
      const reserved = module.heapBytes();
      await e.train(2);
      await e.validationLoss();
      await e.generate('x', { maxTokens: 5 });
      await e.generate('x', { maxTokens: 5, mode: 'polling' });
      assert.equal(module.heapBytes(), reserved, `${preset}: the heap grew after create`);
    } finally {
      e.dispose();
    }
  }
});

test(`${VARIANT}: the engine in a worker (serveEngine / EngineClient protocol)`, async () => {
  const w = new Worker(path.join(ROOT, 'tests', 'wasm', 'worker-host.mjs'));
  const port = {
    postMessage: (m, t) => w.postMessage(m, t),
    addEventListener: (_type, l) => w.on('message', (data) => l({ data })),
  };
  const client = new EngineClient(port);
  try {
    const build = await client.call('load', { buildDir: BUILD_DIR, variant: VARIANT });
    assert.equal(build.variant, VARIANT);
    await assert.rejects(
      client.call('train', { steps: 1 }),
      (e) => e instanceof EngineError && /no model/.test(e.message),
    );
    const info = await client.call('create', { config: { preset: 'tiny', train: { steps: 10 } } });
    assert.equal(info.model.d_model, 48);
    await assert.rejects(client.call('setCorpus', { corpus: 'short' }), /corpus too small/);
    await client.call('setCorpus', { corpus: fs.readFileSync(dataFile()).subarray(0, 50000) });
    const progress = [];
    const metrics = await client.call('train', { steps: 4 }, (ev) => progress.push(ev.data.done));
    assert.deepEqual(progress, [1, 2, 3, 4]);
    assert.equal(metrics.length, 4);
    const tokens = [];
    const gen = await client.call('generate', { prompt: 'Hi', maxTokens: 10, temperature: 0 }, (ev) =>
      tokens.push(ev.data.token),
    );
    assert.deepEqual(tokens, [...gen.tokens]);
    const ckpt = await client.call('exportCheckpoint', {});
    assert.ok(ckpt instanceof Uint8Array && ckpt.length > 1000);
    // abort: a long training call stops at its next step
    const long = client.call('train', { steps: 10000 });
    await new Promise((r) => setTimeout(r, 200));
    await client.call('abort', {});
    await assert.rejects(long, /aborted/);
    const after = await client.call('importCheckpoint', { bytes: ckpt });
    assert.equal(after.step, 4);
    // LoRA through the protocol: a fresh run of adapters on the frozen base.
    await client.call('startFinetune', { options: { steps: 5, lora: { rank: 2, targets: ['qkv', 'o'] } } });
    const names = (await client.call('tensorNames', {})).map((t) => t.name);
    assert.ok(names.includes('blocks.0.attn.qkv.lora_A') && names.includes('blocks.0.attn.o_proj.lora_A'), names);
    assert.ok(!names.some((n) => n.includes('fc_in.lora')), 'only the targets given');
    const tuned = await client.call('train', { steps: 1 });
    assert.equal(tuned[0].step, 1, 'the fine-tuning run counts its own steps');
    await client.call('dispose', {});
  } finally {
    await w.terminate();
  }
});

// A host with more cores than the threads it asks for (train.mjs --threads 8 on a 16-core machine):
// the engine's default thread count is the hardware concurrency, and a kernel pool wider than the
// module's workers aborts. A child process sees 16 cores (os.cpus, which the glue reads) and loads
// the module with a pool of 2, then trains a step.
test(`${VARIANT}: a pool smaller than the machine's cores`, { skip: VARIANT !== 'simd-threads' }, () => {
  const fake = `const os = require('os'); const c = os.cpus();
    os.cpus = () => Array.from({ length: 16 }, () => c[0]); os.availableParallelism = () => 16;`;
  const script = `
    const { loadModule, Engine } = await import(${JSON.stringify(path.join(ROOT, 'web', 'engine', 'dist', 'index.js'))});
    const m = await loadModule({ buildDir: ${JSON.stringify(BUILD_DIR)}, variant: 'simd-threads', poolSize: 2 });
    const e = await Engine.create({ preset: 'tiny', train: { steps: 2, seed: 3 } }, m);
    await e.setCorpus(new TextEncoder().encode('hello world, hello pool. '.repeat(400)));
    const r = await e.train(2);
    console.log(JSON.stringify({ threads: m.build.num_threads, loss: r[1].loss }));
    e.dispose(); m.terminate();`;
  const dir = fs.mkdtempSync(path.join(BUILD_DIR, 'pool-'));
  try {
    fs.writeFileSync(path.join(dir, 'cores.cjs'), fake);
    fs.writeFileSync(path.join(dir, 'run.mjs'), script);
    let out;
    try {
      out = execFileSync(process.execPath, ['-r', path.join(dir, 'cores.cjs'), path.join(dir, 'run.mjs')], {
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'pipe'],
      });
    } catch (e) {
      // The glue prints its own source with an abort: the last lines say what happened.
      assert.fail(`the child failed: ${String(e.stderr).split('\n').slice(-3).join(' | ').slice(0, 400)}`);
    }
    const r = JSON.parse(out.trim().split('\n').pop());
    assert.equal(r.threads, 2);
    assert.ok(Number.isFinite(r.loss) && r.loss > 0, `loss ${r.loss}`);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

// GPT-2's GELU through a create config (issue 27's WebAssembly benchmark of GPT-2 124M): the
// model's program applies the tanh form (the gelu ops' "tanh" attribute), the config reports it,
// and any other name is refused.
test(`${VARIANT}: a create config's model.gelu "tanh" builds GPT-2's GELU`, async () => {
  const tanh = await Engine.create({ preset: 'tiny', model: { gelu: 'tanh' } }, module);
  const erf = await Engine.create({ preset: 'tiny', model: { gelu: 'erf' } }, module);
  try {
    assert.equal((await tanh.info()).model.gelu, 'tanh');
    const gelus = async (e) =>
      (await e.exportProgram('forward')).ops.filter((op) => op.op === 'gelu').map((op) => op.attrs.tanh ?? 0);
    assert.deepEqual(await gelus(tanh), [1, 1]);
    assert.deepEqual(await gelus(erf), [0, 0]);
    await assert.rejects(
      Engine.create({ preset: 'tiny', model: { gelu: 'relu' } }, module),
      /gelu must be "erf" or "tanh", got "relu"/,
    );
  } finally {
    tanh.dispose();
    erf.dispose();
  }
});

// The model's program is built once by the engine: the one the WebAssembly engine exports must be
// native `ptl program`'s, tensor for tensor. (An 8-layer model once gave blocks.6.attn.lse the
// shape [0, 6, 0] here: a reference into the program's tensors kept across an insertion.)
test(`${VARIANT}: an 8-layer train program with dropout equals native ptl program's`, async () => {
  const e = await Engine.create(
    { preset: 'tiny', model: { n_layers: 8, n_heads: 6, ctx: 16 }, train: { batch: 2, dropout: 0.25 } },
    module,
  );
  const dir = fs.mkdtempSync(path.join(BUILD_DIR, 'program-'));
  try {
    const got = await e.exportProgram('train');
    const file = path.join(dir, 'train.json');
    ptl(
      ['program', '--preset', 'tiny', '--layers', '8', '--heads', '6', '--ctx', '16', '--batch', '2'].concat([
        '--dropout',
        '0.25',
        '--program',
        'train',
        '--out',
        file,
      ]),
    );
    const want = JSON.parse(fs.readFileSync(file, 'utf8'));
    assert.deepEqual(got.tensors, want.tensors);
    assert.deepEqual(got.ops, want.ops);
  } finally {
    e.dispose();
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
