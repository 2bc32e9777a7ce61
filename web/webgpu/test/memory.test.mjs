// Memory shared by liveness (src/memory.ts): the plan never gives one buffer to two tensors live at
// the same time, it comes within a few percent of the live peak, and training with shared buffers
// computes exactly what training with a buffer per tensor computes.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, test } from 'node:test';

import { WebGPUTrainer, bufferBytes, parseProgram, planMemory } from '../dist/index.js';
import { OUT, backend, closeBackend, rng, run, tool } from './helpers.mjs';

after(closeBackend);

const program = (name, args) => {
  const out = join(OUT, `memory-${name}.json`);
  run(tool('ptl'), ['program', ...args, '--out', out]);
  return JSON.parse(readFileSync(out, 'utf8'));
};

// Live ranges computed here on their own (first to last op touching the tensor; the whole run for
// inputs, results no op reads and what the host reads back) to check the plan against.
function liveRanges(p) {
  const end = p.ops.length;
  const range = p.tensors.map(() => [Infinity, -1]);
  const read = p.tensors.map(() => false);
  p.ops.forEach((op, i) => {
    for (const id of [...op.inputs, ...op.outputs].filter((x) => x >= 0)) {
      range[id][0] = Math.min(range[id][0], i);
      range[id][1] = Math.max(range[id][1], i);
    }
    for (const id of op.inputs.filter((x) => x >= 0)) read[id] = true;
  });
  const params = new Set(p.tensors.filter((t) => t.kind === 'parameter').map((t) => t.name));
  p.tensors.forEach((t, i) => {
    const hostReads =
      ['loss', 'grad_norm', 'logits'].includes(t.name) || (t.name.startsWith('grad.') && params.has(t.name.slice(5)));
    if (t.kind === 'input' || !read[i] || hostReads || range[i][1] < 0) range[i] = [-1, end];
  });
  return range;
}

function checkPlan(p, plan) {
  const range = liveRanges(p);
  // The engine's ranges, which the plan reads from the JSON, are the ones computed here.
  p.tensors.forEach((t, i) => {
    const persistent = ['parameter', 'optim_state', 'state'].includes(t.kind);
    assert.deepEqual(t.live, persistent ? undefined : range[i], `live range of '${t.name}'`);
  });
  const bySlot = new Map();
  p.tensors.forEach((t, i) => {
    const persistent = ['parameter', 'optim_state', 'state'].includes(t.kind);
    assert.equal(plan.slot[i] < 0, persistent, `tensor '${t.name}' (${t.kind}) placed as persistent: ${persistent}`);
    if (persistent) return;
    assert.ok(plan.slotBytes[plan.slot[i]] >= bufferBytes(t.shape), `'${t.name}' is larger than its buffer`);
    for (const j of bySlot.get(plan.slot[i]) ?? []) {
      const [a, b] = [range[i], range[j]];
      assert.ok(a[1] < b[0] || b[1] < a[0], `'${t.name}' and '${p.tensors[j].name}' share a buffer while both live`);
    }
    bySlot.set(plan.slot[i], [...(bySlot.get(plan.slot[i]) ?? []), i]);
  });
  assert.equal(
    plan.bytes,
    plan.slotBytes.reduce((a, b) => a + b, 0),
  );
  assert.ok(plan.livePeak <= plan.bytes, 'no layout holds less than the live peak');
}

test("a program's live ranges: checked against its ops; without them, a buffer per tensor", () => {
  const p = program('tiny-generate-ranges', ['--preset', 'tiny', '--program', 'generate']);
  const i = p.tensors.findIndex((t) => t.live && t.live[0] >= 0 && t.live[1] > t.live[0]);
  const name = p.tensors[i].name;
  const cut = structuredClone(p);
  cut.tensors[i].live = [cut.tensors[i].live[0], cut.tensors[i].live[0]];
  assert.throws(
    () => parseProgram(cut),
    new RegExp(`tensor '${name.replace(/\./g, '\\.')}' has live range \\[\\d+, \\d+\\] but op \\d+ \\(\\w+\\) uses it`),
  );
  const bad = structuredClone(p);
  bad.tensors[i].live = [0, p.ops.length + 1];
  assert.throws(() => parseProgram(bad), /has live range \[0,\d+\] \(two op indices, -1 to \d+\)/);
  const bare = structuredClone(p);
  for (const t of bare.tensors) delete t.live;
  const plan = planMemory(parseProgram(bare));
  assert.equal(plan.bytes, plan.unshared, 'no ranges: nothing shared');
  assert.ok(planMemory(parseProgram(p)).bytes < plan.bytes, 'with them: shared');
});

test('the plan: no two tensors live at once share a buffer; near the live peak', () => {
  // [name, ptl program's options, the most bytes allowed over the live peak]: whole buffers fit
  // training programs (many tensors of a few sizes) within a few percent; small programs of
  // unlike tensors less tightly.
  const cases = [
    ['tiny train, dropout', ['--preset', 'tiny', '--batch', '2', '--dropout', '0.1'], 1.05],
    ['tiny inspect', ['--preset', 'tiny', '--program', 'inspect'], 1.25],
    ['tiny generate', ['--preset', 'tiny', '--program', 'generate'], 1.25],
    // GPT-2 124M's blocks (12 layers, d 768, T 1024; a byte vocabulary) with LoRA r 16 on every
    // projection at batch 4: the run that must fit in a browser tab.
    [
      '124M LoRA B4 T1024',
      [
        ...['--preset', 'small', '--layers', '12', '--d-model', '768', '--heads', '12', '--ctx', '1024'],
        ...['--batch', '4', '--lora-rank', '16', '--lora-alpha', '32', '--lora-targets', 'qkv,o,fc_in,fc_out'],
      ],
      1.05,
    ],
  ];
  for (const [name, args, over] of cases) {
    const p = program(name.replace(/\W+/g, '-'), args);
    const plan = planMemory(p);
    checkPlan(p, plan);
    const unshared = planMemory(p, false);
    checkPlan(p, unshared);
    assert.equal(unshared.bytes, unshared.unshared, `${name}: share = false gives every tensor its own buffer`);
    assert.ok(
      plan.bytes <= over * plan.livePeak,
      `${name}: ${plan.bytes} bytes against a live peak of ${plan.livePeak}`,
    );
    if (name.startsWith('124M')) {
      const GiB = 2 ** 30;
      assert.ok(plan.bytes < 2.5 * GiB, `${name}: ${(plan.bytes / GiB).toFixed(2)} GiB`);
      assert.ok(plan.unshared > 4 * plan.bytes, `${name}: a buffer per tensor would take ${plan.unshared} bytes`);
    }
  }
});

test('training with shared buffers equals training with a buffer per tensor, bitwise', async () => {
  const p = program('train', ['--preset', 'tiny', '--batch', '2', '--dropout', '0.1']);
  const T = p.model_config.ctx;
  const r = rng(7);
  const init = p.tensors
    .filter((t) => t.kind === 'parameter')
    .map((t) => {
      const n = t.shape.reduce((a, b) => a * b, 1);
      return { name: t.name, shape: t.shape, data: Float32Array.from({ length: n }, () => 0.05 * r.normal()) };
    });
  const batches = Array.from({ length: 3 }, () => ({
    tokens: Array.from({ length: 2 * T }, () => r.int(256)),
    targets: Array.from({ length: 2 * T }, () => r.int(256)),
  }));
  const { backend: be } = await backend();
  const train = async (share, lossesKept) => {
    be.clearStore();
    be.loadWeights(init);
    const ex = await be.load(p, share);
    const trainer = new WebGPUTrainer(ex, { seed: 1337, lossesKept });
    for (const b of batches) trainer.trainStep(b.tokens, b.targets, 1e-3);
    await trainer.flush();
    const weights = [];
    for (const t of init) weights.push(await be.readPersistent(t.name));
    const out = { losses: [...trainer.losses.values()], weights, bytes: ex.bufferBytes };
    ex.destroy();
    return out;
  };
  const own = await train(false);
  // The trainer keeps the last lossesKept steps' losses only (a long run's memory stays flat).
  const shared = await train(true, 2);
  assert.ok(shared.bytes < 0.75 * own.bytes, `shared ${shared.bytes} bytes, a buffer each ${own.bytes}`);
  assert.equal(own.losses.length, 3);
  assert.deepEqual(shared.losses, own.losses.slice(1));
  assert.ok(own.losses.every((l) => Number.isFinite(l.loss) && Number.isFinite(l.gradNorm)));
  shared.weights.forEach((w, i) => assert.deepEqual(w, own.weights[i], `weights of '${init[i].name}'`));
});
