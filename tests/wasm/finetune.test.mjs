// Post-training through the WebAssembly API (what the playground's Fine-tune panel uses):
// startFinetune with LoRA, SFT data whose batches carry the loss mask (nextBatch) and whose
// train program has the "loss_mask" input, adapters out and back in (and refused on another
// base), and the same errors as native for bad JSONL. The fused qkv target (GPT-2's c_attn): its
// train program is native's, one step of it gives native's loss, gradients and adapters, and an
// adapter trained here samples in native `ptl sample --adapter` as here.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import fs from 'node:fs';
import path from 'node:path';

import {
  Engine,
  EngineError,
  encodeSafetensors,
  f32,
  load,
  maxAbsDiff,
  nativeProgramRun,
  needsNative,
  parseSafetensors,
  ptl,
  tmpDir,
  VARIANT,
} from './helpers.mjs';

let module, dir;
before(async () => {
  module = await load();
  dir = tmpDir('ptl-wasm-finetune-');
});
after(() => {
  module?.terminate();
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

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
  const all = JSON.parse(ptl(['info', '--defaults', '--json']));
  const defaults = all.lora_train;
  const e = await Engine.create({ preset: 'small', train: { steps: 5 } }, module);
  try {
    await e.setCorpus('The bus was late again, so Maria walked to the office. '.repeat(40));
    // Full fine-tuning has ptl sft's rate.
    await e.startFinetune({});
    assert.equal((await e.loraInfo()).enabled, false);
    assert.equal((await e.info()).train.lr, all.sft.lr);
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

test(`${VARIANT}: a full fine-tune after LoRA starts from the adapted model and trains every weight`, async () => {
  const e = await Engine.create({ preset: 'tiny', train: { steps: 5 } }, module);
  try {
    await e.setCorpus('The bus was late again, so Maria walked to the office. '.repeat(40));
    await e.startFinetune({ steps: 10, lr: 1e-2, lora: { rank: 2, targets: ['q', 'v', 'fc_in'] } });
    await e.train(10);
    const adapted = (await e.generate('The bus', { maxTokens: 24, temperature: 0 })).text;
    await e.startFinetune({ steps: 3 });
    // The adapters are merged into the weights, not dropped: the same model until it trains.
    assert.equal((await e.loraInfo()).enabled, false);
    assert.equal((await e.generate('The bus', { maxTokens: 24, temperature: 0 })).text, adapted);
    const before = parseSafetensors(await e.exportCheckpoint());
    await e.train(3);
    const after = parseSafetensors(await e.exportCheckpoint());
    // Every weight moved (with adapters left on, only they would have).
    const weights = [...before.tensors.keys()].filter((n) => !n.startsWith('optim.'));
    assert.ok(weights.length > 10 && !weights.some((n) => n.includes('lora')), weights.join(', '));
    for (const name of weights)
      assert.ok(maxAbsDiff(f32(before.tensors.get(name)), f32(after.tensors.get(name))) > 0, `${name} did not train`);
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

test(
  `${VARIANT}: LoRA on qkv: native's train program; one step gives native's loss, gradients and adapters`,
  needsNative,
  async () => {
    const RANK = 4,
      ALPHA = 8,
      BATCH = 2,
      LR = 1e-2;
    const base = await Engine.create({ preset: 'small', train: { steps: 5, seed: 3 } }, module);
    const weights = await base.exportCheckpoint({ optimizer: false });
    base.dispose();
    const basePath = path.join(dir, 'base.tinygpt');
    fs.writeFileSync(basePath, weights);
    const tuned = await Engine.fromCheckpoint(weights, module, 'base.tinygpt');
    try {
      await tuned.setSftData(jsonl, 'task.jsonl');
      await tuned.startFinetune({
        steps: 8,
        lr: LR,
        batch: BATCH,
        lora: { rank: RANK, alpha: ALPHA, targets: ['qkv'] },
      });
      const info = await tuned.loraInfo();
      assert.deepEqual(info.targets, ['qkv']);
      const { n_layers: L, d_model: C } = (await tuned.info()).model;
      assert.equal(info.trainable_params, L * RANK * (C + 3 * C)); // per layer: A [r, C], B [3C, r]

      // The engine's train program (SFT: with the loss mask) is `ptl program`'s with the same LoRA.
      const program = await tuned.exportProgram('train');
      const lora = ['--lora-rank', String(RANK), '--lora-alpha', String(ALPHA), '--lora-targets', 'qkv'];
      const native = JSON.parse(ptl(['program', basePath, '--program', 'train', '--batch', String(BATCH), ...lora]));
      const maskless = program.tensors.filter((t) => t.name !== 'loss_mask');
      assert.deepEqual(
        maskless.map((t) => [t.name, t.shape, t.trainable]),
        native.tensors.map((t) => [t.name, t.shape, t.trainable]),
      );
      const adapters = program.tensors.filter((t) => t.trainable).map((t) => t.name);
      assert.equal(adapters.length, L * 4); // per layer: A and the q, k, v row blocks of B
      assert.deepEqual(adapters.slice(0, 4), [
        'blocks.0.attn.qkv.lora_A',
        ...['q', 'k', 'v'].map((p) => `blocks.0.attn.qkv.${p}.lora_B`),
      ]);

      // One step of that program on the same inputs, in WebAssembly and natively: base weights,
      // random adapters (B not zero, so that A's gradient is not either), a batch with its mask.
      let seed = 11;
      const rand = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
      const T = program.tensors.find((t) => t.name === 'tokens').shape[1];
      const inputs = {};
      for (const [name, t] of parseSafetensors(weights).tensors)
        inputs[name] = { dtype: 'F32', shape: t.shape, data: f32(t) };
      for (const t of program.tensors.filter((x) => x.trainable))
        inputs[t.name] = {
          dtype: 'F32',
          shape: t.shape,
          data: Float32Array.from({ length: t.shape[0] * t.shape[1] }, () => (rand() * 2 - 1) * 0.2),
        };
      const b = await tuned.nextBatch();
      inputs.tokens = { dtype: 'I32', shape: [BATCH, T], data: b.tokens };
      inputs.targets = { dtype: 'I32', shape: [BATCH, T], data: b.targets };
      inputs.loss_mask = { dtype: 'F32', shape: [BATCH, T], data: b.mask };
      inputs['optim.hparams'] = { dtype: 'F32', shape: [2], data: Float32Array.of(LR, 1) };
      const bytes = encodeSafetensors(inputs);
      const got = parseSafetensors(await module.runProgram(program, bytes)).tensors;
      const want = parseSafetensors(nativeProgramRun(dir, program, bytes, 'lora-qkv')).tensors;
      const close = (name, rel) => {
        const w = f32(want.get(name));
        const scale = w.reduce((m, x) => Math.max(m, Math.abs(x)), 0);
        const d = maxAbsDiff(f32(got.get(name)), w);
        assert.ok(d <= rel * scale, `${name}: differs from native by ${d} (largest value ${scale})`);
        return scale;
      };
      close('loss', 1e-6);
      close('grad_norm', 1e-5);
      for (const a of adapters) {
        assert.ok(close(`grad.${a}`, 1e-5) > 0, `grad.${a} is zero`);
        close(a, 1e-5);
        close(`optim.m.${a}`, 1e-5);
        close(`optim.v.${a}`, 1e-5);
        assert.ok(maxAbsDiff(f32(got.get(a)), inputs[a].data) > 0, `${a} did not move`);
      }
      // The frozen base is what it was.
      assert.equal(
        maxAbsDiff(f32(got.get('blocks.0.attn.q_proj.weight')), inputs['blocks.0.attn.q_proj.weight'].data),
        0,
      );

      // Trained here, the adapter samples natively as it does here.
      const metrics = await tuned.train(7);
      assert.ok(metrics.every((m) => Number.isFinite(m.loss)));
      const adapterPath = path.join(dir, 'qkv.tinygpt-lora');
      fs.writeFileSync(adapterPath, await tuned.exportAdapter());
      assert.match(ptl(['lora', 'info', adapterPath]), /qkv/);
      const prompt = 'word 7:';
      const out = ptl(
        ['sample', basePath, '--adapter', adapterPath, '--prompt', prompt, '--temperature', '0', '--max-tokens', '12'],
        { encoding: 'buffer' },
      );
      const g = await tuned.generate(prompt, { maxTokens: 12, temperature: 0 });
      assert.deepEqual(Buffer.from(g.tokens), out.subarray(prompt.length, out.length - 1));
    } finally {
      tuned.dispose();
    }
  },
);
