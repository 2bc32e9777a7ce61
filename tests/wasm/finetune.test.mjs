// Post-training through the WebAssembly API (what the playground's Fine-tune panel uses):
// startFinetune with LoRA, SFT data whose batches carry the loss mask (nextBatch) and whose
// train program has the "loss_mask" input, adapters out and back in (and refused on another
// base), and the same errors as native for bad JSONL.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { Engine, EngineError, load, ptl, VARIANT } from './helpers.mjs';

let module;
before(async () => {
  module = await load();
});
after(() => module?.terminate());

const jsonl =
  Array.from({ length: 40 }, (_, i) =>
    JSON.stringify({ prompt: `word ${i}:`, response: ` ${String(i).split('').reverse().join('')}` }),
  ).join('\n') + '\n';

test(`${VARIANT}: LoRA on SFT data: masked batches, the LoRA train program, adapters round-trip`, async () => {
  const base = await Engine.create({ preset: 'small', train: { steps: 5, seed: 3 } }, module);
  const weights = await base.exportCheckpoint({ optimizer: false });
  base.dispose();
  const tuned = await Engine.fromCheckpoint(weights, module, 'base.tinygpt');
  const other = await Engine.create({ preset: 'small', train: { steps: 5, seed: 9 } }, module);
  try {
    await tuned.setSftData(jsonl, 'task.jsonl');
    await tuned.startFinetune({ steps: 20, lr: 3e-3, lora: { rank: 2, alpha: 4, targets: ['q', 'v'] } });
    const info = await tuned.loraInfo();
    assert.equal(info.enabled, true);
    assert.equal(info.rank, 2);
    assert.deepEqual(info.targets, ['q', 'v']);
    assert.equal(info.trainable_params, 3 * 2 * 2 * (96 + 96)); // layers x {q,v} x r x (in + out)

    const program = await tuned.exportProgram('train');
    const names = program.tensors.map((t) => t.name);
    assert.ok(names.includes('loss_mask'), 'the SFT train program has the loss mask input');
    assert.ok(
      names.some((n) => n.endsWith('.lora_A')),
      'and the adapters',
    );

    const b = await tuned.nextBatch();
    assert.ok(b.mask instanceof Float32Array, 'SFT batches carry their mask');
    assert.equal(b.mask.length, b.tokens.length);
    const ones = b.mask.filter((x) => x === 1).length;
    assert.ok(ones > 0 && ones < b.mask.length, 'only response bytes count');
    assert.ok(b.mask.every((x) => x === 0 || x === 1));

    const metrics = await tuned.train(19);
    assert.ok(metrics.every((m) => Number.isFinite(m.loss)));
    const adapter = await tuned.exportAdapter();
    // Back onto the same base: the same generations.
    const again = await Engine.fromCheckpoint(weights, module, 'base.tinygpt');
    try {
      await again.loadAdapter(adapter, 'adapter.tinygpt-lora');
      const g1 = await tuned.generate('word 7:', { maxTokens: 12, temperature: 0 });
      const g2 = await again.generate('word 7:', { maxTokens: 12, temperature: 0 });
      assert.equal(g2.text, g1.text);
    } finally {
      again.dispose();
    }
    // Onto another base: refused, and that model still works.
    await assert.rejects(
      other.loadAdapter(adapter, 'adapter.tinygpt-lora'),
      (e) => e instanceof EngineError && /base/.test(e.message),
    );
    assert.equal((await other.loraInfo()).enabled, false);
    await other.generate('x', { maxTokens: 2 });
  } finally {
    tuned.dispose();
    other.dispose();
  }
});

test(`${VARIANT}: what a fine-tune config leaves out is ptl lora train's default`, async () => {
  const defaults = JSON.parse(ptl(['info', '--defaults', '--json'])).lora_train;
  const e = await Engine.create({ preset: 'small', train: { steps: 5 } }, module);
  try {
    await e.setCorpus('The bus was late again, so Maria walked to the office. '.repeat(40));
    // Full fine-tuning keeps its own rate.
    await e.startFinetune({});
    assert.equal((await e.loraInfo()).enabled, false);
    assert.equal((await e.info()).train.lr, 1e-3);
    assert.equal((await e.info()).train.steps, defaults.steps);
    await e.startFinetune({ lora: {} });
    const info = await e.loraInfo();
    assert.equal(info.rank, defaults.rank);
    assert.equal(info.alpha, defaults.alpha);
    const sorted = (list) => [...list].sort(); // loraInfo lists them by name
    assert.deepEqual(sorted(info.targets), sorted(defaults.targets));
    const train = (await e.info()).train;
    assert.equal(train.lr, defaults.lr);
    assert.equal(train.steps, defaults.steps);
    // A field given replaces only itself.
    await e.startFinetune({ steps: 3, lora: { rank: 1 } });
    assert.equal((await e.loraInfo()).rank, 1);
    assert.deepEqual(sorted((await e.loraInfo()).targets), sorted(defaults.targets));
    assert.equal((await e.info()).train.steps, 3);
  } finally {
    e.dispose();
  }
});

test(`${VARIANT}: bad fine-tuning input names the problem and changes nothing`, async () => {
  const e = await Engine.create({ preset: 'tiny', train: { steps: 5 } }, module);
  try {
    await assert.rejects(
      e.setSftData('{"prompt": "a", "response": "b"}\n{"prompt": "c",\n', 'bad.jsonl'),
      (err) => err instanceof EngineError && /bad\.jsonl.*line 2/.test(err.message),
    );
    await assert.rejects(
      e.startFinetune({ steps: 5, lora: { rank: 100, alpha: 8, targets: ['q'] } }),
      (err) => err instanceof EngineError && /rank/.test(err.message),
    );
    await assert.rejects(
      e.startFinetune({ steps: 5, lora: { rank: 2, alpha: 8, targets: ['qq'] } }),
      (err) => err instanceof EngineError && /qq/.test(err.message),
    );
    await assert.rejects(
      e.exportAdapter(),
      (err) => err instanceof EngineError && /no LoRA adapters/.test(err.message),
    );
    assert.equal((await e.loraInfo()).enabled, false);
  } finally {
    e.dispose();
  }
});
