// The engine's training loop through the WebAssembly API: the events after each step (what the
// playground's worker acts on), the loss history kept by the engine's rule, and an external
// executor driving the loop step by step (nextBatch, recordStep) with its weights synced back
// tensor by tensor (tensorNames, readTensor, writeTensor, setStep).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { after, before, test } from 'node:test';

import { Engine, EngineError, dataFile, load, parseSafetensors, VARIANT } from './helpers.mjs';

let module, text;
before(async () => {
  module = await load();
  text = fs.readFileSync(dataFile()).subarray(0, 20000);
});
after(() => module?.terminate());

const config = (train) => ({ preset: 'tiny', train: { batch: 4, seed: 11, ...train } });
const history = async (e) => JSON.parse(parseSafetensors(await e.exportCheckpoint()).metadata.loss_history);

test(`${VARIANT}: train reports the loop's events, and the history follows the engine's rule`, async () => {
  const e = await Engine.create(config({ steps: 25, eval_every: 10, sample_every: 20 }), module);
  try {
    await e.setCorpus(text);
    const all = [];
    const vals = new Map();
    for (let i = 0; i < 25; i++) {
      const [m] = await e.train(1);
      all.push(m);
      if (m.events.evaluate) vals.set(m.step, (await e.validationLoss()).loss);
    }
    const due = (k) => all.filter((m) => m.events[k]).map((m) => m.step);
    assert.deepEqual(due('evaluate'), [10, 20, 25]);
    assert.deepEqual(due('save'), [10, 20, 25]);
    assert.deepEqual(due('sample'), [20]);
    assert.deepEqual(due('last'), [25]);
    assert.deepEqual(e.eventsAfter(30), { evaluate: true, sample: false, save: true, last: false });
    // A point every 10th step and at every validation, with the train loss of its step.
    const loss = new Map(all.map((m) => [m.step, m.loss]));
    const h = await history(e);
    assert.deepEqual(
      h.map((p) => p[0]),
      [10, 20, 25],
    );
    for (const [step, train, val] of h) {
      assert.equal(train, loss.get(step));
      assert.equal(val, vals.get(step));
    }
    // The loop's extra events: a sample at the last step, a save every N steps.
    e.loopOptions({ sampleAtEnd: true, saveEvery: 4 });
    assert.deepEqual(e.eventsAfter(25), { evaluate: true, sample: true, save: true, last: true });
    assert.equal(e.eventsAfter(8).save, true);
    assert.equal(e.eventsAfter(9).save, false);
    assert.throws(() => e.loopOptions({ saveEvery: -1 }), EngineError);
  } finally {
    e.dispose();
  }
});

test(`${VARIANT}: an external executor steps the loop and syncs the weights tensor by tensor`, async () => {
  // `cpu` trains itself; `ext` is driven as the WebGPU worker drives it, with `gpu` (another
  // engine on the same weights and data) standing in for the executor that runs the steps.
  const steps = 12;
  const cfg = config({ steps, eval_every: 5, sample_every: 0 });
  const [cpu, ext, gpu] = [
    await Engine.create(cfg, module),
    await Engine.create(cfg, module),
    await Engine.create(cfg, module),
  ];
  try {
    for (const e of [cpu, ext, gpu]) await e.setCorpus(text);
    const names = ext.tensorNames();
    assert.ok(names.some((t) => t.name === 'tok_emb.weight' && t.present));
    assert.ok(
      names.some((t) => t.name === 'optim.m.tok_emb.weight' && !t.present),
      'moments are listed before they exist',
    );
    assert.throws(() => ext.readTensor('optim.m.tok_emb.weight'), /not present/);

    const cpuMetrics = [];
    for (let s = 1; s <= steps; s++) {
      const [m] = await cpu.train(1);
      cpuMetrics.push(m);
      if (m.events.evaluate) await cpu.validationLoss();
    }
    for (let s = 1; s <= steps; s++) {
      const b = await ext.nextBatch();
      assert.equal(b.step, s);
      const before = ext.eventsAfter(b.step); // decided before the loss comes back
      const [m] = await gpu.train(1); // the same batch, drawn from the same data order
      assert.equal(m.lr, b.lr);
      const ev = ext.recordStep({ step: b.step, loss: m.loss, gradNorm: m.grad_norm, seconds: m.seconds });
      assert.deepEqual(ev, before);
      assert.deepEqual(ev, cpuMetrics[s - 1].events);
      if (ev.evaluate) {
        for (const t of gpu.tensorNames()) ext.writeTensor(t.name, gpu.readTensor(t.name));
        await ext.validationLoss();
      }
    }
    // Steps are recorded once, in order, and not past the engine's count.
    assert.throws(() => ext.recordStep({ step: steps, loss: 1 }), /not the next step/);
    assert.throws(() => ext.recordStep({ step: steps + 1, loss: 1 }), /not the next step/);

    const a = parseSafetensors(await cpu.exportCheckpoint());
    const b = parseSafetensors(await ext.exportCheckpoint());
    assert.deepEqual([...b.tensors.keys()].sort(), [...a.tensors.keys()].sort());
    for (const [name, t] of a.tensors)
      assert.ok(t.data.equals(b.tensors.get(name).data), `${name} is bitwise the CPU run's`);
    assert.deepEqual(JSON.parse(b.metadata.loss_history), JSON.parse(a.metadata.loss_history));
    assert.deepEqual(
      JSON.parse(b.metadata.loss_history).map((p) => p[0]),
      [5, 10, 12],
    );
    assert.equal(JSON.parse(b.metadata.train_state).step, steps);
    assert.equal(JSON.parse(b.metadata.train_state).data_rng, JSON.parse(a.metadata.train_state).data_rng);

    // Writes are checked: size, name.
    const w = ext.readTensor('tok_emb.weight');
    assert.throws(() => ext.writeTensor('tok_emb.weight', w.subarray(1)), /bytes/);
    assert.throws(() => ext.writeTensor('no_such', w), /not a tensor of this model's state/);
    ext.setStep(3);
    assert.equal((await ext.info()).step, 3);
    assert.throws(() => ext.setStep(-1), EngineError);
  } finally {
    for (const e of [cpu, ext, gpu]) e.dispose();
  }
});

test(`${VARIANT}: a non-finite loss stops the loop with the step named`, async () => {
  const e = await Engine.create(config({ steps: 10 }), module);
  try {
    await e.setCorpus(text);
    await e.nextBatch();
    await e.nextBatch();
    e.recordStep({ step: 1, loss: 5.5, gradNorm: 1 });
    assert.throws(() => e.recordStep({ step: 2, loss: NaN }), /training diverged at step 2: loss is NaN/);
    assert.throws(
      () => e.recordStep({ step: 2, loss: 5, gradNorm: Infinity }),
      /training diverged at step 2: gradient norm is/,
    );
  } finally {
    e.dispose();
  }
});
