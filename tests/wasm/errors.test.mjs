// Bad input rejects with the engine's own message (EngineError), and the engine stays usable.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';

import { Engine, EngineError, dataFile, load, nativeSmallRun, VARIANT } from './helpers.mjs';

let module, engine, corpus;
before(async () => {
  module = await load();
  corpus = fs.readFileSync(dataFile());
  engine = await Engine.create({ preset: 'tiny', train: { steps: 100 } }, module);
  await engine.setCorpus(corpus);
});
after(() => {
  engine?.dispose();
  module?.terminate();
});

async function rejectsWith(promise, pattern) {
  await assert.rejects(promise, (e) => {
    assert.ok(e instanceof EngineError, `expected an EngineError, got ${e}`);
    assert.match(e.message, pattern);
    assert.equal(e.engineMessage, e.message);
    return true;
  });
}

// The engine still trains, evaluates, generates and exports after each error.
async function stillUsable() {
  const before = (await engine.info()).step;
  const [m] = await engine.train(1);
  assert.equal(m.step, before + 1);
  assert.ok(Number.isFinite(m.loss));
  assert.equal((await engine.generate('a', { maxTokens: 3, temperature: 0 })).tokens.length, 3);
  assert.ok((await engine.exportCheckpoint()).length > 1000);
}

test(`${VARIANT}: corrupt checkpoint bytes are rejected and the trainer keeps its state`, async () => {
  await stillUsable();
  const good = new Uint8Array(await engine.exportCheckpoint());
  const step = (await engine.info()).step;
  const cases = [
    [new Uint8Array(0), /./],
    [new Uint8Array([1, 2, 3]), /./],
    [good.slice(0, good.length - 100), /./], // truncated tensor data
    [
      (() => {
        const b = good.slice();
        b.fill(0x7b, 8, 40);
        return b;
      })(),
      /./,
    ], // garbled header
    [
      (() => {
        const b = good.slice();
        new DataView(b.buffer).setBigUint64(0, 1n << 40n, true);
        return b;
      })(),
      /./,
    ],
  ];
  for (const [bytes, pattern] of cases) {
    await rejectsWith(engine.importCheckpoint(bytes, 'bad.tinygpt'), pattern);
    await rejectsWith(Engine.fromCheckpoint(bytes, module, 'bad.tinygpt'), pattern);
    assert.equal((await engine.info()).step, step, 'a failed load changed the trainer');
  }
  // A checkpoint of another model loads fine after all that.
  const err = await engine.importCheckpoint(good.slice(0, 8)).catch((e) => e);
  console.log(`# e.g. a truncated checkpoint: ${err.message}`);
  await stillUsable();
});

test(`${VARIANT}: impossible configs are rejected with the engine's message`, async () => {
  await rejectsWith(
    Engine.create({ preset: 'tiny', model: { d_model: 50, n_heads: 3 } }, module),
    /d_model 50 is not divisible by n_heads 3/,
  );
  await rejectsWith(Engine.create({ preset: 'nope' }, module), /unknown preset 'nope'/);
  await rejectsWith(Engine.create({ preset: 'tiny', model: { n_layer: 2 } }, module), /unknown key 'n_layer'/);
  await rejectsWith(
    Engine.create({ preset: 'tiny', train: { lr: -1 } }, module),
    /learning rate must be a positive number/,
  );
  await rejectsWith(
    Engine.create({ preset: 'tiny', train: { schedule: 'linear' } }, module),
    /unknown schedule 'linear'/,
  );
  await rejectsWith(engine.updateTrainConfig({ batch: 3 }), /'batch' cannot change/);
  await rejectsWith(engine.generate('x', { maxTokens: 3, temperature: -1 }), /temperature/);
  await rejectsWith(engine.generate('x', { maxTokens: 3, topP: 0 }), /top-p/);
  await rejectsWith(engine.exportProgram('backward'), /unknown program 'backward'/);
  await stillUsable();
});

test(`${VARIANT}: a corpus shorter than the context is rejected and the old corpus stays`, async () => {
  await rejectsWith(engine.setCorpus('too short'), /corpus too small/);
  await rejectsWith(engine.setCorpus(''), /corpus is empty/);
  await stillUsable(); // still trains on the corpus set before
  const fresh = await Engine.create({ preset: 'tiny' }, module);
  try {
    await rejectsWith(fresh.train(1), /no corpus set/);
    await rejectsWith(fresh.validationLoss(), /no validation split|no corpus/);
    await fresh.setCorpus(corpus.subarray(0, 5000));
    assert.equal((await fresh.train(2)).length, 2);
  } finally {
    fresh.dispose();
  }
});

test(`${VARIANT}: a disposed engine rejects calls; other engines in the module are unaffected`, async () => {
  const other = await Engine.create({ preset: 'tiny' }, module);
  other.dispose();
  await rejectsWith(other.info(), /disposed/);
  await stillUsable();
  // A native checkpoint of another size loads into this trainer (the whole state is replaced).
  const small = await Engine.fromCheckpoint(
    new Uint8Array(fs.readFileSync(path.join(nativeSmallRun(), 'model.tinygpt'))),
    module,
  );
  assert.equal((await small.info()).model.d_model, 96);
  small.dispose();
});
