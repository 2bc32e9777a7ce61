// bin/train.mjs (ptl-webgpu-train): a Tiny run on WebGPU driven by the WebAssembly engine against
// native `ptl train` with the same options (same batches, same learning rates): the training and
// validation losses must agree step by step; its checkpoint must load in native `ptl eval` and
// give the validation loss the tool printed; `--resume` must continue the run.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';

import { OUT, PKG, REPO, findCorpus, run, tool } from './helpers.mjs';

const WASM = process.env.PTL_WASM_BUILD_DIR ?? join(REPO, 'build-wasm');
const STEPS = 8;
// A custom shape (Tiny's options overridden), small enough for SwiftShader.
const model = ['--preset', 'tiny', '--layers', '1', '--d-model', '32', '--heads', '2', '--ctx', '24', '--batch', '4'];
const shape = [...model, '--steps', String(STEPS), '--lr', '2e-3', '--seed', '7'];
const evals = ['--eval-every', '3', '--sample-every', '0'];
const dir = join(OUT, 'train-cli');

function trainCli(args) {
  const r = spawnSync(process.execPath, [join(PKG, 'bin', 'train.mjs'), ...args], {
    encoding: 'utf8',
    env: { ...process.env },
    maxBuffer: 1 << 26,
  });
  assert.equal(r.status, 0, `train.mjs ${args.join(' ')} failed (${r.status}):\n${r.stderr}`);
  return { result: JSON.parse(r.stdout.trim().split('\n').at(-1)), log: r.stderr };
}

const readMetrics = (d) =>
  readFileSync(join(d, 'metrics.jsonl'), 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l));

test('train.mjs: Tiny on WebGPU matches ptl train; its checkpoint evaluates in ptl eval as printed; --resume continues', () => {
  for (const p of [join(WASM, 'simd-threads', 'ptl_engine.wasm'), join(REPO, 'web', 'engine', 'dist', 'index.js')])
    assert.ok(existsSync(p), `${p} is missing: build it (wasm/build.sh simd-threads; npm --prefix web run build)`);
  rmSync(dir, { recursive: true, force: true });
  const gpuDir = join(dir, 'webgpu');
  const cpuDir = join(dir, 'cpu');
  const data = findCorpus();
  const snapshots = ['--snapshot-every', '4', '--snapshot-from', '4'];
  const { result, log } = trainCli([
    ...shape,
    ...evals,
    ...snapshots,
    '--data',
    data,
    '--threads',
    '1',
    '--out',
    gpuDir,
  ]);
  assert.match(log, /step 3: train loss [\d.]+, val loss [\d.]+/);
  assert.equal(result.steps, STEPS);

  run(tool('ptl'), ['train', ...shape, ...evals, '--data', data, '--threads', '1', '--out', cpuDir]);
  const gpu = readMetrics(gpuDir);
  const cpu = readMetrics(cpuDir);
  assert.deepEqual(
    gpu.map((m) => m.step),
    cpu.map((m) => m.step),
  );
  for (const [i, g] of gpu.entries()) {
    const c = cpu[i];
    for (const k of ['step', 'train_loss', 'lr', 'grad_norm', 'tokens_per_s', 'elapsed_s', 'train_s'])
      assert.ok(Number.isFinite(g[k]), `metrics line ${i + 1} lacks ${k}: ${JSON.stringify(g)}`);
    assert.ok(g.train_s <= g.elapsed_s + 1e-9, `train_s ${g.train_s} > elapsed_s ${g.elapsed_s}`);
    assert.ok(Math.abs(g.lr - c.lr) <= 1e-6 * c.lr, `step ${g.step}: lr ${g.lr} vs ptl's ${c.lr}`);
    const drift = Math.abs(g.train_loss - c.train_loss) / c.train_loss;
    assert.ok(drift < 0.005, `step ${g.step}: train loss ${g.train_loss} vs ptl's ${c.train_loss}`);
    assert.equal('val_loss' in g, 'val_loss' in c, `step ${g.step}: a validation in one run only`);
    if ('val_loss' in c)
      assert.ok(
        Math.abs(g.val_loss - c.val_loss) / c.val_loss < 0.005,
        `step ${g.step}: val loss ${g.val_loss} vs ptl's ${c.val_loss}`,
      );
  }
  assert.deepEqual(
    gpu.filter((m) => 'val_loss' in m).map((m) => m.step),
    [3, 6, 8],
  );

  // The checkpoint in native ptl: the whole validation split, as the tool printed it.
  const ckpt = join(gpuDir, 'model.tinygpt');
  const ev = JSON.parse(run(tool('ptl'), ['eval', ckpt, '--json']));
  assert.ok(
    Math.abs(ev.loss - result.final_val_loss) <= 1e-4,
    `ptl eval ${ev.loss} vs train.mjs ${result.final_val_loss}`,
  );
  assert.match(log, new RegExp(`validation split \\(as ptl eval\\): loss ${result.final_val_loss.toFixed(6)}`));
  assert.match(run(tool('ptl'), ['info', ckpt]), new RegExp(`trained: +${STEPS} steps`));
  // --snapshot-every: the weights of steps 4 (no validation there) and 8, for `ptl average`.
  assert.deepEqual(readdirSync(join(gpuDir, 'snapshots')), ['step-000004.tinygpt', 'step-000008.tinygpt']);
  const last = JSON.parse(run(tool('ptl'), ['eval', join(gpuDir, 'snapshots', 'step-000008.tinygpt'), '--json']));
  assert.equal(last.loss, ev.loss, 'the last snapshot holds the checkpoint’s weights');

  // --resume: two more steps, appended to the same logs.
  const more = trainCli(['--resume', ckpt, '--steps', String(STEPS + 2), '--threads', '1', '--final-eval', '0']);
  assert.equal(more.result.steps, STEPS + 2);
  const resumed = readMetrics(gpuDir);
  assert.deepEqual(
    resumed.map((m) => m.step),
    [...Array(STEPS + 2).keys()].map((i) => i + 1),
  );
  assert.ok('val_loss' in resumed.at(-1), 'a validation at the resumed run’s last step');
});

test('train.mjs: a diverged step stops the run, names the step and the last good checkpoint, and writes nothing', () => {
  const d = join(OUT, 'train-cli-diverge');
  rmSync(d, { recursive: true, force: true });
  const data = findCorpus();
  // The run to resume: 10 steps by native ptl train (the same checkpoint and run folder; the test
  // above checks that the two agree), so that only the diverging run compiles the WebGPU kernels.
  run(tool('ptl'), [
    'train',
    ...model,
    '--steps',
    '10',
    '--lr',
    '2e-3',
    '--seed',
    '7',
    '--eval-every',
    '5',
    '--sample-every',
    '0',
    '--data',
    data,
    '--threads',
    '1',
    '--out',
    d,
  ]);
  const ckpt = join(d, 'model.tinygpt');
  const good = readFileSync(ckpt);
  // A learning rate of 1e30 blows the weights up on the first update: the next step's loss is NaN.
  const args = ['--resume', ckpt, '--steps', '20', '--lr', '1e30', '--schedule', 'constant', '--threads', '1'];
  const r = spawnSync(process.execPath, [join(PKG, 'bin', 'train.mjs'), ...args, '--final-eval', '0'], {
    encoding: 'utf8',
    maxBuffer: 1 << 26,
  });
  assert.notEqual(r.status, 0, `a diverged run exited 0:\n${r.stderr}`);
  assert.match(r.stderr, /training diverged at step 12: loss is NaN \(try a lower --lr\)/);
  assert.match(r.stderr, /the last good checkpoint is .*model\.tinygpt \(step 10\)/);
  assert.ok(readFileSync(ckpt).equals(good), 'the checkpoint was overwritten');
  const steps = readMetrics(d).map((m) => m.step);
  assert.equal(steps.at(-1), 11, `metrics.jsonl ends at step ${steps.at(-1)}: the diverged step is not logged`);
});
