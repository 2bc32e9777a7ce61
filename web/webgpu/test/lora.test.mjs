// LoRA with the fused qkv target (GPT-2's c_attn: one A over the attention input, one B whose
// three row blocks update q, k and v) trained on WebGPU against the CPU engine: the train program
// of `ptl program --lora-targets qkv` run by ptl_program_run on the CPU and by the WebGPU executor
// from the same base and adapters (B not zero, so that every gradient is) on the same batches.
// The loss and gradient norm of every step, the adapters' gradients of the first step, and the
// adapters and AdamW moments after the last must agree; the frozen base must not move.
import assert from 'node:assert/strict';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, test } from 'node:test';

import { decodeSafeTensors, encodeSafeTensors } from '../dist/index.js';
import { OUT, backend, closeBackend, compare, cpuTrain, rng, run, tool } from './helpers.mjs';

const dir = join(OUT, 'lora');
rmSync(dir, { recursive: true, force: true });
mkdirSync(dir, { recursive: true });
const RANK = 4,
  ALPHA = 8,
  BATCH = 2,
  STEPS = 3,
  LR = 1e-2;

test(`LoRA qkv (rank ${RANK}): ${STEPS} train steps on WebGPU give the CPU engine's losses, gradients and adapters`, async (t) => {
  const ptl = tool('ptl');
  const base = join(dir, 'base.tinygpt');
  const programPath = join(dir, 'train.json');
  run(ptl, ['init', '--preset', 'tiny', '--seed', '3', '--out', base]);
  const lora = ['--lora-rank', String(RANK), '--lora-alpha', String(ALPHA), '--lora-targets', 'qkv'];
  run(ptl, ['program', base, '--batch', String(BATCH), '--program', 'train', ...lora, '--out', programPath]);
  const program = JSON.parse(readFileSync(programPath, 'utf8'));
  const { n_layers: L, d_model: C, ctx: T, vocab_size: V } = program.model_config;

  // The adapters: per layer one A [r, C] and three B blocks [C, r]; nothing on q_proj itself.
  const adapters = program.tensors.filter((x) => x.trainable);
  const want = [];
  for (let l = 0; l < L; l++)
    want.push(
      { name: `blocks.${l}.attn.qkv.lora_A`, shape: [RANK, C] },
      ...['q', 'k', 'v'].map((p) => ({ name: `blocks.${l}.attn.qkv.${p}.lora_B`, shape: [C, RANK] })),
    );
  assert.deepEqual(
    adapters.map((x) => ({ name: x.name, shape: x.shape })).sort((a, b) => a.name.localeCompare(b.name)),
    want.sort((a, b) => a.name.localeCompare(b.name)),
  );

  // Base weights from ptl init; A and B random (B = 0 at a fresh start would leave A's gradient 0).
  const r = rng(77);
  const baseFile = decodeSafeTensors(new Uint8Array(readFileSync(base)), base);
  const tensors = baseFile.tensors.filter((x) => !x.name.startsWith('optim.'));
  for (const a of adapters)
    tensors.push({
      name: a.name,
      dtype: 'F32',
      shape: a.shape,
      data: Float32Array.from({ length: a.shape[0] * a.shape[1] }, () => (r.uniform() * 2 - 1) * 0.2),
    });
  const init = join(dir, 'init.safetensors');
  writeFileSync(init, encodeSafeTensors({ metadata: {}, tensors }));
  const steps = [];
  for (let s = 0; s < STEPS; s++) {
    const tokens = Array.from({ length: BATCH * T }, () => r.int(V));
    const targets = Array.from({ length: BATCH * T }, () => r.int(V));
    steps.push({ tokens, targets, lr: LR });
  }
  writeFileSync(join(dir, 'batches.json'), JSON.stringify({ first_step: 1, steps }));

  // CPU: every tensor after step 1 (the gradients), the adapters and moments after the last.
  const cpu = cpuTrain({
    init,
    program: programPath,
    batches: join(dir, 'batches.json'),
    out: join(dir, 'cpu.json'),
    more: [
      '--save',
      join(dir, 'cpu_final.safetensors'),
      '--dump-step',
      '1',
      '--dump',
      join(dir, 'cpu_step1.safetensors'),
    ],
  });
  const byName = (f) =>
    new Map(decodeSafeTensors(new Uint8Array(readFileSync(f))).tensors.map((x) => [x.name, x.data]));
  const step1 = byName(join(dir, 'cpu_step1.safetensors'));
  const final = byName(join(dir, 'cpu_final.safetensors'));

  // WebGPU.
  const { backend: be } = await backend();
  be.loadWeights(tensors);
  const ex = await be.load(program);
  const grads = adapters.map((a) => `grad.${a.name}`);
  const gpuLosses = [];
  try {
    for (let s = 0; s < STEPS; s++) {
      ex.setInput('tokens', steps[s].tokens);
      ex.setInput('targets', steps[s].targets);
      ex.setHparams(steps[s].lr, s + 1);
      const out = await ex.run(['loss', 'grad_norm', ...(s === 0 ? grads : [])]);
      const loss = out.get('loss')[0],
        norm = out.get('grad_norm')[0];
      gpuLosses.push(loss);
      t.diagnostic(
        `step ${s + 1}: loss cpu ${cpu.losses[s]} gpu ${loss}; grad norm cpu ${cpu.grad_norms[s]} gpu ${norm}`,
      );
      assert.ok(Math.abs(loss - cpu.losses[s]) <= 1e-5 * Math.abs(cpu.losses[s]), `step ${s + 1} loss`);
      assert.ok(Math.abs(norm - cpu.grad_norms[s]) <= 1e-4 * cpu.grad_norms[s], `step ${s + 1} grad norm`);
      if (s > 0) continue;
      for (const g of grads) {
        const w = step1.get(g);
        const scale = w.reduce((m, x) => Math.max(m, Math.abs(x)), 0);
        assert.ok(scale > 0, `${g} is zero on the CPU`);
        const c = compare(out.get(g), w, 1e-4 * scale, 0);
        assert.ok(c.ok, `${g}: max abs diff ${c.maxAbs} (largest value ${scale})`);
      }
    }
    for (const a of adapters)
      for (const name of [a.name, `optim.m.${a.name}`, `optim.v.${a.name}`]) {
        const w = final.get(name);
        assert.ok(w, `${name} not in the CPU's final state`);
        const scale = w.reduce((m, x) => Math.max(m, Math.abs(x)), 0);
        const c = compare(await be.readPersistent(name), w, 1e-4 * scale, 1e-5);
        assert.ok(c.ok, `${name}: max abs diff ${c.maxAbs} (largest value ${scale})`);
      }
    // The adapters moved; the base did not (and has no moments).
    const a0 = `blocks.0.attn.qkv.lora_A`;
    assert.ok(compare(final.get(a0), tensors.find((x) => x.name === a0).data, 0, 0).maxAbs > 1e-3);
    const q = tensors.find((x) => x.name === 'blocks.0.attn.q_proj.weight');
    assert.equal(compare(await be.readPersistent(q.name), q.data, 0, 0).maxAbs, 0);
    assert.ok(!be.store.has('optim.m.blocks.0.attn.q_proj.weight'));
  } finally {
    ex.destroy();
  }
});

after(() => closeBackend());
