// Checkpoints cross between native `ptl` and the WebAssembly engine in both directions.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';

import {
  Engine,
  dataFile,
  load,
  nativeBpeRun,
  nativeSmallRun,
  parseSafetensors,
  ptl,
  relDiff,
  tmpDir,
  VARIANT,
} from './helpers.mjs';

let module, dir, shortText;
before(async () => {
  module = await load();
  dir = tmpDir();
  // A short text for `ptl eval --data` (the whole corpus would take a while window by window).
  shortText = path.join(dir, 'short.txt');
  fs.writeFileSync(shortText, fs.readFileSync(dataFile()).subarray(0, 20000));
});
after(() => {
  module?.terminate();
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

test(`${VARIANT}: a checkpoint written by wasm loads in native ptl (info, eval)`, async () => {
  const engine = await Engine.create({ preset: 'tiny', train: { steps: 20, seed: 7 } }, module);
  try {
    await engine.setCorpus(fs.readFileSync(dataFile()));
    await engine.train(5);
    await engine.validationLoss();
    const file = path.join(dir, 'wasm.tinygpt');
    fs.writeFileSync(file, await engine.exportCheckpoint());
    const info = JSON.parse(ptl(['info', file, '--json']));
    assert.equal(info.step, 5);
    assert.equal(info.has_optimizer_state, true);
    assert.deepEqual(info.model_config, { vocab_size: 256, n_layers: 2, d_model: 48, n_heads: 3, ctx: 32 });
    assert.equal(info.train_config.seed, 7);
    assert.equal(info.last_loss.step, 5);
    assert.ok(info.last_loss.val_loss > 0);

    const native = JSON.parse(ptl(['eval', file, '--data', shortText, '--json']));
    const wasm = await engine.evaluate(fs.readFileSync(shortText));
    const d = relDiff(wasm.loss, native.loss);
    console.log(
      `# eval of a wasm checkpoint: wasm ${wasm.loss} native ${native.loss} (relative difference ${d.toExponential(2)})`,
    );
    assert.ok(d < 1e-5, `evaluate: wasm ${wasm.loss} vs native ${native.loss}`);
    assert.equal(wasm.tokens, native.tokens);

    // Weights only: a valid checkpoint without optimizer moments.
    const wfile = path.join(dir, 'weights.tinygpt');
    fs.writeFileSync(wfile, await engine.exportWeights());
    const winfo = JSON.parse(ptl(['info', wfile, '--json']));
    assert.equal(winfo.has_optimizer_state, false);
  } finally {
    engine.dispose();
  }
});

test(`${VARIANT}: an odd vocabulary (263 tokens) trains in wasm and evaluates the same in native ptl`, async () => {
  // The loss over chunks of the vocabulary (cross_entropy_tied) in both builds, for a model over
  // a BPE tokenizer of 263 tokens: one step natively (ptl train --tokenizer), three in wasm.
  const run = nativeBpeRun(263, 1);
  const engine = await Engine.fromCheckpoint(new Uint8Array(fs.readFileSync(path.join(run, 'model.tinygpt'))), module);
  try {
    assert.equal((await engine.info()).model.vocab_size, 263);
    await engine.setCorpus(fs.readFileSync(dataFile()).subarray(0, 100000));
    const m = await engine.train(3);
    assert.ok(m[0].loss < Math.log(263) + 0.1, `loss ${m[0].loss} is not about log 263 or below`);
    const file = path.join(dir, 'vocab263.tinygpt');
    fs.writeFileSync(file, await engine.exportCheckpoint());
    assert.equal(JSON.parse(ptl(['info', file, '--json'])).model_config.vocab_size, 263);
    const native = JSON.parse(ptl(['eval', file, '--data', shortText, '--json']));
    const wasm = await engine.evaluate(fs.readFileSync(shortText));
    assert.ok(relDiff(wasm.loss, native.loss) < 1e-5, `evaluate: wasm ${wasm.loss} vs native ${native.loss}`);
  } finally {
    engine.dispose();
  }
});

test(`${VARIANT}: a native checkpoint loads in wasm, tensors byte-identical on export`, async () => {
  const nativeFile = path.join(nativeSmallRun(), 'model.tinygpt');
  const nativeBytes = new Uint8Array(fs.readFileSync(nativeFile));
  const engine = await Engine.fromCheckpoint(nativeBytes, module, nativeFile);
  try {
    const info = await engine.info();
    assert.equal(info.step, 50);
    assert.deepEqual(info.model, { vocab_size: 256, n_layers: 3, d_model: 96, n_heads: 3, ctx: 64 });
    const a = parseSafetensors(nativeBytes);
    const b = parseSafetensors(await engine.exportCheckpoint());
    assert.deepEqual([...b.tensors.keys()].sort(), [...a.tensors.keys()].sort());
    let bytes = 0;
    for (const [name, t] of a.tensors) {
      const u = b.tensors.get(name);
      assert.deepEqual(u.shape, t.shape, name);
      assert.equal(u.dtype, t.dtype, name);
      assert.ok(Buffer.compare(u.data, t.data) === 0, `tensor ${name} differs`);
      bytes += t.data.length;
    }
    assert.deepEqual(b.metadata, a.metadata);
    console.log(`# ${a.tensors.size} tensors, ${bytes} bytes identical after native -> wasm -> export`);

    // And it computes the same thing: evaluation of the same text.
    const native = JSON.parse(ptl(['eval', nativeFile, '--data', shortText, '--json']));
    const wasm = await engine.evaluate(fs.readFileSync(shortText));
    assert.ok(relDiff(wasm.loss, native.loss) < 1e-5, `evaluate: wasm ${wasm.loss} vs native ${native.loss}`);
  } finally {
    engine.dispose();
  }
});

// A half-precision export (`ptl export --dtype f16|bf16`) loads in wasm widened to F32: the
// weights wasm exports again are bitwise those native ptl widens the same file to.
test(`${VARIANT}: F16 and BF16 exports load in wasm as native ptl loads them`, async () => {
  const nativeFile = path.join(nativeSmallRun(), 'model.tinygpt');
  for (const dtype of ['f16', 'bf16']) {
    const half = path.join(dir, `${dtype}.tinygpt`);
    const widened = path.join(dir, `${dtype}-native-f32.tinygpt`);
    ptl(['export', nativeFile, '--out', half, '--dtype', dtype]);
    ptl(['export', half, '--out', widened]);
    const engine = await Engine.fromCheckpoint(new Uint8Array(fs.readFileSync(half)), module, half);
    try {
      assert.equal((await engine.info()).step, 50);
      const a = parseSafetensors(new Uint8Array(fs.readFileSync(widened)));
      const b = parseSafetensors(await engine.exportWeights());
      assert.deepEqual([...b.tensors.keys()].sort(), [...a.tensors.keys()].sort());
      for (const [name, t] of a.tensors) {
        assert.equal(b.tensors.get(name).dtype, 'F32', name);
        assert.ok(Buffer.compare(b.tensors.get(name).data, t.data) === 0, `${dtype}: tensor ${name} differs`);
      }
      const native = JSON.parse(ptl(['eval', half, '--data', shortText, '--json']));
      const wasm = await engine.evaluate(fs.readFileSync(shortText));
      assert.ok(
        relDiff(wasm.loss, native.loss) < 1e-5,
        `${dtype} evaluate: wasm ${wasm.loss} vs native ${native.loss}`,
      );
    } finally {
      engine.dispose();
    }
  }
});

test(`${VARIANT}: importCheckpoint replaces a trainer's state; exportProgram gives the training program`, async () => {
  const engine = await Engine.create({ preset: 'tiny' }, module);
  try {
    const nativeFile = path.join(nativeSmallRun(), 'model.tinygpt');
    await engine.importCheckpoint(new Uint8Array(fs.readFileSync(nativeFile)));
    const info = await engine.info();
    assert.equal(info.model.d_model, 96);
    assert.equal(info.step, 50);
    const prog = await engine.exportProgram('train');
    assert.equal(prog.name, 'train');
    assert.ok(Array.isArray(prog.tensors) && prog.tensors.length > 0);
    assert.ok(Array.isArray(prog.ops) && prog.ops.length > 0);
    const kinds = new Set(prog.ops.map((o) => o.op));
    for (const k of ['embedding', 'attention', 'cross_entropy_tied', 'adamw'])
      assert.ok(kinds.has(k), `train program lacks ${k}: ${[...kinds]}`);
    for (const which of ['eval', 'forward', 'generate']) assert.equal((await engine.exportProgram(which)).name, which);
    // prefill: the generate program over a block of a prompt's tokens (32, or the context if shorter).
    const tokens = (p) => p.tensors.find((t) => t.name === 'tokens').shape;
    assert.deepEqual(tokens(await engine.exportProgram('generate')), [1, 1]);
    const prefill = await engine.exportProgram('prefill');
    assert.equal(prefill.name, 'generate');
    assert.deepEqual(tokens(prefill), [1, Math.min(32, info.model.ctx)]);
  } finally {
    engine.dispose();
  }
});
