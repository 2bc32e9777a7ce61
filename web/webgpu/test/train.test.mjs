// A Tiny training run on WebGPU against the CPU engine, from the same initial weights on the same
// batches with the same learning rates: the loss must agree within 0.5% at every step. Then the
// WebGPU run's checkpoint must load in `ptl` (`ptl info`) and resume (`ptl train --resume`).
import assert from 'node:assert/strict';
import { readFileSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { after, test } from 'node:test';

import { WebGPUTrainer, decodeSafeTensors, dropoutKey } from '../dist/index.js';
import { OUT, backend, closeBackend, compare, cpuTrain, findCorpus, rng, run, tool } from './helpers.mjs';

// 20 steps by default (a step takes about a second on SwiftShader); PTL_WEBGPU_STEPS=50 for a longer check.
const STEPS = Number(process.env.PTL_WEBGPU_STEPS ?? 20);
const BATCH = 4;
const PEAK_LR = 1e-3; // larger than the default so that a few steps move the weights visibly
const MAX_DRIFT = 0.005;
// With dropout: another key moves the first loss by about 5e-4, so the bound is tighter (the
// measured drift, with and without dropout, is about 1e-7).
const MAX_DRIFT_DROPOUT = 1e-4;

const dir = join(OUT, 'train');
rmSync(dir, { recursive: true, force: true });
mkdirSync(dir, { recursive: true });
const summary = { steps: STEPS, batch: BATCH };

// Warm-up then cosine decay to 10% of the peak (the spec's default schedule).
function lrAt(step) {
  const warmup = Math.max(1, Math.floor(STEPS / 10));
  if (step < warmup) return (PEAK_LR * (step + 1)) / warmup;
  const t = (step - warmup) / Math.max(1, STEPS - warmup);
  return PEAK_LR * (0.1 + 0.45 * (1 + Math.cos(Math.PI * t)));
}

// STEPS batches of random windows of T + 1 bytes of the training split (first 90%) of
// TinyShakespeare, each with the step's learning rate.
function batches(T, seed) {
  const text = readFileSync(findCorpus());
  const train = text.subarray(0, Math.floor(text.length * 0.9));
  const r = rng(seed);
  const steps = [];
  for (let s = 0; s < STEPS; s++) {
    const tokens = [],
      targets = [];
    for (let b = 0; b < BATCH; b++) {
      const o = r.int(train.length - T - 1);
      for (let i = 0; i < T; i++) {
        tokens.push(train[o + i]);
        targets.push(train[o + i + 1]);
      }
    }
    steps.push({ tokens, targets, lr: Math.fround(lrAt(s)) });
  }
  return steps;
}

test(`Tiny: ${STEPS} steps on WebGPU match the CPU engine within 0.5% per step; the checkpoint resumes in ptl`, async (t) => {
  const ptl = tool('ptl');
  const init = join(dir, 'init.tinygpt');
  const programPath = join(dir, 'train.json');
  run(ptl, ['init', '--preset', 'tiny', '--seed', '1', '--out', init]);
  run(ptl, ['program', '--preset', 'tiny', '--batch', String(BATCH), '--program', 'train', '--out', programPath]);
  const program = JSON.parse(readFileSync(programPath, 'utf8'));
  const T = program.model_config.ctx;

  const steps = batches(T, 1234);
  writeFileSync(join(dir, 'batches.json'), JSON.stringify({ first_step: 1, steps }));

  // CPU reference.
  const t0 = performance.now();
  const cpu = cpuTrain({
    init,
    program: programPath,
    batches: join(dir, 'batches.json'),
    out: join(dir, 'cpu.json'),
    more: ['--save', join(dir, 'cpu_final.safetensors')],
  });
  summary.cpu_seconds = (performance.now() - t0) / 1000;

  // WebGPU.
  const { backend: be, description } = await backend();
  summary.adapter = description;
  const initFile = decodeSafeTensors(new Uint8Array(readFileSync(init)), init);
  be.loadWeights(initFile.tensors);
  const t1 = performance.now();
  const ex = await be.load(program);
  summary.load_seconds = (performance.now() - t1) / 1000;
  summary.dispatches_per_step = ex.dispatchCount;
  summary.pipelines = be.pipelineCount;
  const trainer = new WebGPUTrainer(ex, { readEvery: 1 });
  const t2 = performance.now();
  for (const s of steps) trainer.trainStep(s.tokens, s.targets, s.lr);
  await trainer.flush();
  summary.gpu_seconds = (performance.now() - t2) / 1000;

  let maxDrift = 0;
  const rows = [];
  for (let s = 0; s < STEPS; s++) {
    const g = trainer.losses.get(s + 1);
    assert.ok(g, `no loss read back for step ${s + 1}`);
    const c = cpu.losses[s];
    const drift = Math.abs(g.loss - c) / Math.abs(c);
    maxDrift = Math.max(maxDrift, drift);
    rows.push({ step: s + 1, cpu: c, gpu: g.loss, drift, cpu_norm: cpu.grad_norms[s], gpu_norm: g.gradNorm });
  }
  summary.max_step_drift = maxDrift;
  summary.first_loss = { cpu: cpu.losses[0], gpu: rows[0].gpu };
  summary.last_loss = { cpu: cpu.losses[STEPS - 1], gpu: rows[STEPS - 1].gpu };
  summary.per_step = rows;
  for (const row of rows.filter((x, i) => i % 10 === 0 || i === STEPS - 1))
    t.diagnostic(
      `step ${row.step}: cpu ${row.cpu.toFixed(6)} gpu ${row.gpu.toFixed(6)} drift ${(row.drift * 100).toFixed(4)}%`,
    );
  t.diagnostic(`max drift ${(maxDrift * 100).toFixed(5)}% over ${STEPS} steps`);

  // Final weights and moments against the CPU's (informational: fp32 drift grows with steps).
  const cpuFinal = decodeSafeTensors(new Uint8Array(readFileSync(join(dir, 'cpu_final.safetensors'))));
  let wAbs = 0;
  for (const tn of cpuFinal.tensors.filter((x) => !x.name.startsWith('optim.'))) {
    const g = await be.readPersistent(tn.name);
    wAbs = Math.max(wAbs, compare(g, tn.data, 0, 0).maxAbs);
  }
  summary.final_weights_max_abs_diff = wAbs;

  // The checkpoint: ptl must read it and continue the run.
  const ckpt = join(dir, 'webgpu.tinygpt');
  writeFileSync(ckpt, await trainer.exportCheckpoint(initFile, true));
  const info = run(ptl, ['info', ckpt]);
  summary.ptl_info = info.split('\n').slice(0, 12).join('\n');
  assert.match(info, /step/i);
  const resumeDir = join(dir, 'resume');
  run(ptl, [
    'train',
    '--resume',
    ckpt,
    '--steps',
    String(STEPS + 3),
    '--data',
    findCorpus(),
    '--out',
    resumeDir,
    '--eval-every',
    '1000',
    '--sample-every',
    '0',
  ]);
  const metrics = readFileSync(join(resumeDir, 'metrics.jsonl'), 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l));
  const resumed = metrics.filter((m) => m.train_loss !== undefined);
  summary.resumed_steps = resumed.map((m) => ({ step: m.step, train_loss: m.train_loss }));
  assert.equal(resumed.length, 3, 'ptl train --resume ran 3 steps');
  assert.equal(resumed[0].step, STEPS + 1);
  for (const m of resumed)
    assert.ok(Number.isFinite(m.train_loss) && m.train_loss < cpu.losses[0], `resumed loss ${m.train_loss}`);

  ex.destroy();
  assert.ok(maxDrift <= MAX_DRIFT, `max per-step loss drift ${(maxDrift * 100).toFixed(4)}% exceeds 0.5%`);
});

// The same comparison with dropout on (rate 0.1 at every site, attention probabilities included):
// both backends draw the masks from {dropoutKey(seed), step}, so the losses must agree as closely.
test(`Tiny with dropout 0.1: ${STEPS} steps on WebGPU match the CPU engine within 0.01% per step`, async (t) => {
  const ptl = tool('ptl');
  const seed = 1;
  const init = join(dir, 'drop_init.tinygpt');
  const programPath = join(dir, 'drop_train.json');
  run(ptl, ['init', '--preset', 'tiny', '--seed', String(seed), '--out', init]);
  run(ptl, [
    'program',
    '--preset',
    'tiny',
    '--batch',
    String(BATCH),
    '--program',
    'train',
    '--dropout',
    '0.1',
    '--out',
    programPath,
  ]);
  const program = JSON.parse(readFileSync(programPath, 'utf8'));
  const kinds = program.ops.map((o) => o.op);
  assert.ok(kinds.includes('dropout') && kinds.includes('dropout_backward'), 'the program has dropout ops');
  const seedId = program.tensors.findIndex((x) => x.name === 'dropout.seed');
  assert.ok(
    program.ops.some((o) => o.op === 'attention_backward' && o.inputs[6] === seedId && o.attrs.threshold > 0),
    'attention_backward drops probabilities',
  );
  const T = program.model_config.ctx;
  const steps = batches(T, 4321);
  const key = dropoutKey(seed);
  writeFileSync(join(dir, 'drop_batches.json'), JSON.stringify({ first_step: 1, dropout_key: key, steps }));
  const cpu = cpuTrain({
    init,
    program: programPath,
    batches: join(dir, 'drop_batches.json'),
    out: join(dir, 'drop_cpu.json'),
  });

  const { backend: be } = await backend();
  be.clearStore(); // no AdamW moments of the run before
  be.loadWeights(decodeSafeTensors(new Uint8Array(readFileSync(init)), init).tensors);
  const ex = await be.load(program);
  const trainer = new WebGPUTrainer(ex, { readEvery: 1, seed });
  for (const s of steps) trainer.trainStep(s.tokens, s.targets, s.lr);
  await trainer.flush();
  let maxDrift = 0;
  for (let s = 0; s < STEPS; s++) {
    const g = trainer.losses.get(s + 1);
    assert.ok(g, `no loss read back for step ${s + 1}`);
    maxDrift = Math.max(maxDrift, Math.abs(g.loss - cpu.losses[s]) / Math.abs(cpu.losses[s]));
    if (s % 10 === 0 || s === STEPS - 1)
      t.diagnostic(`step ${s + 1}: cpu ${cpu.losses[s].toFixed(6)} gpu ${g.loss.toFixed(6)}`);
  }
  // The masks matter: with another key the CPU's first losses move far more than the drift.
  const other = join(dir, 'drop_other_key.json');
  writeFileSync(other, JSON.stringify({ first_step: 1, dropout_key: key ^ 1, steps: steps.slice(0, 3) }));
  const wrong = cpuTrain({ init, program: programPath, batches: other, out: join(dir, 'drop_other.json') }).losses;
  const wrongGap = Math.max(...wrong.map((l, s) => Math.abs(l - trainer.losses.get(s + 1).loss) / Math.abs(l)));
  t.diagnostic(`another key: the first 3 losses differ by up to ${(wrongGap * 100).toFixed(4)}%`);
  assert.ok(wrongGap > 10 * maxDrift, `another key's losses (gap ${wrongGap}) are as close as the drift (${maxDrift})`);
  summary.dropout = {
    p: 0.1,
    key,
    max_step_drift: maxDrift,
    first_loss: cpu.losses[0],
    last_loss: cpu.losses[STEPS - 1],
  };
  t.diagnostic(`dropout: max drift ${(maxDrift * 100).toFixed(5)}% over ${STEPS} steps`);
  ex.destroy();
  assert.ok(
    maxDrift <= MAX_DRIFT_DROPOUT,
    `max per-step loss drift with dropout ${(maxDrift * 100).toFixed(4)}% exceeds 0.01%`,
  );
});

after(() => {
  writeFileSync(join(OUT, 'train.json'), JSON.stringify(summary, null, 1));
  closeBackend();
});
