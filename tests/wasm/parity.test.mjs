// Training parity: the WebAssembly engine (the SIMD + threads build by default) trains Small for
// 50 steps on TinyShakespeare with the native run's exact config, and every loss matches native.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { after, before, test } from 'node:test';

import { Engine, SMALL_STEPS, dataFile, load, nativeSmallRun, readMetrics, relDiff, VARIANT } from './helpers.mjs';

const TOLERANCE = 1e-5; // relative, per step

let module;
before(async () => {
  module = await load();
});
after(() => module?.terminate());

test(`${VARIANT}: Small trains ${SMALL_STEPS} steps with native's losses (within ${TOLERANCE} relative)`, async () => {
  const native = readMetrics(nativeSmallRun());
  assert.equal(native.length, SMALL_STEPS);
  const engine = await Engine.create(
    // No lr: both front ends take the preset's.
    { preset: 'small', train: { batch: 16, seed: 1337, schedule: 'cosine', steps: SMALL_STEPS } },
    module,
  );
  try {
    await engine.setCorpus(fs.readFileSync(dataFile()));
    let events = 0;
    const metrics = await engine.train(SMALL_STEPS, { stepsPerChunk: 5, onProgress: () => events++ });
    assert.equal(events, SMALL_STEPS);
    assert.equal(metrics.length, SMALL_STEPS);
    let worst = 0,
      worstStep = 0;
    for (let i = 0; i < SMALL_STEPS; i++) {
      assert.equal(metrics[i].step, native[i].step);
      assert.ok(relDiff(metrics[i].lr, native[i].lr) < 1e-12, `lr at step ${i + 1}`);
      const d = relDiff(metrics[i].loss, native[i].train_loss);
      if (d > worst) [worst, worstStep] = [d, i + 1];
    }
    const last = metrics[SMALL_STEPS - 1];
    const ms = (metrics.reduce((s, m) => s + m.seconds, 0) / SMALL_STEPS) * 1000;
    console.log(
      `# parity ${VARIANT} (${module.build.num_threads} threads): max relative loss difference ${worst.toExponential(3)} at step ${worstStep}; ` +
        `final loss wasm ${last.loss.toFixed(6)} native ${native[SMALL_STEPS - 1].train_loss.toFixed(6)}; ${ms.toFixed(1)} ms/step`,
    );
    assert.ok(worst <= TOLERANCE, `max relative loss difference ${worst} at step ${worstStep} exceeds ${TOLERANCE}`);
    const info = await engine.info();
    assert.equal(info.step, SMALL_STEPS);
    assert.equal(info.tokens_seen, SMALL_STEPS * 16 * 64);
  } finally {
    engine.dispose();
  }
});
