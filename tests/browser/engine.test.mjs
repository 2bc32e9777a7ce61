// The WebAssembly engine in headless Chromium, in a Web Worker (web/engine/src/browser-worker.ts
// bundled as a classic worker), through the TypeScript API (EngineClient, selectBuild).
// - isolated page (COOP/COEP): selectBuild picks simd-threads; Tiny trains 20 steps on
//   TinyShakespeare with native `ptl train`'s losses (1e-5 relative); corrupt checkpoints reject
//   with the engine's message (the same text native `ptl info` prints) and training continues.
// - page without isolation: selectBuild picks the single-thread simd build and says why; it trains.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import {
  BUILD_DIR,
  NATIVE_PTL,
  dataFile,
  nativeRun,
  openEnginePage,
  readMetrics,
  relDiff,
  tmpDir,
} from './helpers.mjs';

const STEPS = 20;
const TOLERANCE = 1e-5;

function need(variant) {
  const f = path.join(BUILD_DIR, variant, 'ptl_engine.wasm');
  if (!fs.existsSync(f)) throw new Error(`${f} missing: run tests/browser/run.sh (or wasm/build.sh ${variant})`);
}
const nativeTiny = () =>
  readMetrics(
    nativeRun(`tiny-${STEPS}`, [
      '--preset',
      'tiny',
      '--steps',
      String(STEPS),
      '--data',
      dataFile(),
      '--eval-every',
      '1000',
      '--sample-every',
      '0',
    ]),
  );
const tinyShape = () =>
  JSON.parse(execFileSync(NATIVE_PTL, ['info', '--preset', 'tiny', '--json'], { encoding: 'utf8' }));

// In the page: choose a build for Tiny, start the engine worker with it, create Tiny, set the
// corpus and train `steps` steps (counting progress events). Leaves the client in window.engine.
async function trainInPage(page, { model, batch, steps, totalSteps }) {
  return page.evaluate(
    async ({ model, batch, steps, totalSteps }) => {
      const T = window.ptlTest;
      const choice = T.selectBuild({ model, batch });
      const t0 = performance.now();
      const { client, build } = await T.startEngine({ variant: choice.variant });
      const loadMs = performance.now() - t0;
      window.engine = client;
      await client.call('create', { config: { preset: 'tiny', train: { steps: totalSteps } } });
      await client.call('setCorpus', { corpus: await T.fetchBytes('/data/tinyshakespeare.txt') });
      let events = 0;
      const t1 = performance.now();
      const metrics = await client.call('train', { steps, stepsPerChunk: 5 }, (ev) => {
        if (ev.event === 'progress') events++;
      });
      const trainMs = performance.now() - t1;
      const { capabilities, ...rest } = choice;
      return {
        choice: rest,
        capabilities,
        build,
        metrics,
        events,
        loadMs,
        trainMs,
        crossOriginIsolated: self.crossOriginIsolated,
      };
    },
    { model, batch, steps, totalSteps },
  );
}

describe('Chromium, cross-origin isolated page', () => {
  let ctx;
  before(async () => {
    need('simd-threads');
    ctx = await openEnginePage({ isolated: true });
  });
  after(async () => ctx?.close());

  test(`selectBuild picks simd-threads; Tiny trains ${STEPS} steps in a worker with native's losses`, async () => {
    const native = nativeTiny();
    const info = tinyShape();
    const r = await trainInPage(ctx.page, {
      model: info.model_config,
      batch: info.training_memory.batch,
      steps: STEPS,
      totalSteps: STEPS,
    });
    assert.equal(r.crossOriginIsolated, true);
    assert.equal(r.capabilities.crossOriginIsolated, true);
    assert.equal(r.capabilities.threads, true);
    assert.equal(r.choice.variant, 'simd-threads', r.choice.reason);
    assert.match(r.choice.reason, /cross-origin isolated/);
    assert.equal(r.build.variant, 'simd-threads');
    assert.equal(r.build.threads, true);
    assert.ok(r.build.num_threads >= 1);
    assert.equal(r.events, STEPS);
    assert.equal(r.metrics.length, STEPS);
    let worst = 0;
    for (let i = 0; i < STEPS; i++) {
      assert.equal(r.metrics[i].step, native[i].step);
      assert.ok(relDiff(r.metrics[i].lr, native[i].lr) < 1e-12, `lr at step ${i + 1}`);
      worst = Math.max(worst, relDiff(r.metrics[i].loss, native[i].train_loss));
    }
    assert.ok(
      r.metrics[STEPS - 1].loss < r.metrics[0].loss - 0.2,
      `loss did not fall: ${r.metrics[0].loss} -> ${r.metrics[STEPS - 1].loss}`,
    );
    console.log(
      `# chromium ${ctx.browser.version()} simd-threads (${r.build.num_threads} threads): loss ${r.metrics[0].loss.toFixed(4)} -> ` +
        `${r.metrics[STEPS - 1].loss.toFixed(4)}, max relative difference to native ${worst.toExponential(2)}; ` +
        `load ${r.loadMs.toFixed(0)} ms, ${(r.trainMs / STEPS).toFixed(1)} ms/step`,
    );
    assert.ok(worst <= TOLERANCE, `max relative loss difference ${worst} > ${TOLERANCE}`);
    ctx.assertNoErrors();
  });

  test("corrupt checkpoint bytes reject with the engine's message; the trainer keeps training", async () => {
    const good = await ctx.page.evaluate(async () => {
      const bytes = await window.engine.call('exportCheckpoint', { optimizer: true });
      return Array.from(bytes.subarray(0, 64 * 1024)); // enough for the header cases below
    });
    const cases = {
      tooShort: [1, 2, 3],
      garbledHeader: (() => {
        const b = good.slice();
        b.fill(0x7b, 8, 40);
        return b;
      })(),
      truncated: good.slice(0, 4096),
      absurdLength: (() => {
        const b = good.slice();
        b.splice(0, 8, 0, 0, 0, 0, 0, 1, 0, 0);
        return b;
      })(),
    };
    const dir = tmpDir('ptl-browser-');
    try {
      for (const [what, bytes] of Object.entries(cases)) {
        const r = await ctx.page.evaluate(async (bytes) => {
          const T = window.ptlTest;
          const before = await window.engine.call('info', {});
          const imported = await T.settle(
            window.engine.call('importCheckpoint', { bytes: new Uint8Array(bytes), name: 'bad.tinygpt' }),
          );
          const created = await T.settle(
            window.engine.call('fromCheckpoint', { bytes: new Uint8Array(bytes), name: 'bad.tinygpt' }),
          );
          const after = await window.engine.call('info', {});
          return { imported, created, stepBefore: before.step, stepAfter: after.step };
        }, bytes);
        for (const res of [r.imported, r.created]) {
          assert.equal(res.ok, false, `${what}: accepted`);
          assert.equal(res.name, 'EngineError', `${what}: ${res.name}: ${res.message}`);
        }
        assert.equal(r.imported.call, 'ptl_load_checkpoint');
        assert.equal(r.created.call, 'ptl_create_from_checkpoint');
        // The same bytes through native ptl: the same message.
        fs.writeFileSync(path.join(dir, 'bad.tinygpt'), Buffer.from(bytes));
        let stderr = '';
        try {
          execFileSync(path.resolve(NATIVE_PTL), ['info', 'bad.tinygpt'], {
            cwd: dir,
            encoding: 'utf8',
            stdio: ['ignore', 'pipe', 'pipe'],
          });
        } catch (e) {
          if (typeof e.stderr !== 'string') throw e; // could not run ptl at all
          stderr = e.stderr;
        }
        assert.equal(stderr.trim(), `ptl: error: ${r.imported.message}`, `${what}: native and browser messages differ`);
        assert.equal(r.created.message, r.imported.message);
        assert.equal(r.stepAfter, r.stepBefore, `${what}: a failed load changed the trainer`);
      }
      // fromCheckpoint failed, so the worker still holds the trained Tiny: it trains on.
      const more = await ctx.page.evaluate(async () => window.engine.call('train', { steps: 2 }));
      assert.deepEqual(
        more.map((m) => m.step),
        [STEPS + 1, STEPS + 2],
      );
      assert.ok(more.every((m) => Number.isFinite(m.loss)));
      console.log(
        `# e.g. ${cases.tooShort.length} bytes: ${JSON.stringify((await ctx.page.evaluate(async () => window.ptlTest.settle(window.engine.call('importCheckpoint', { bytes: new Uint8Array(3) })))).message)}`,
      );
      ctx.assertNoErrors();
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('Chromium, page without cross-origin isolation', () => {
  let ctx;
  before(async () => {
    need('simd');
    ctx = await openEnginePage({ isolated: false });
  });
  after(async () => ctx?.close());

  test('selectBuild picks the single-thread simd build, says why, and it trains', async () => {
    const native = nativeTiny();
    const info = tinyShape();
    const r = await trainInPage(ctx.page, {
      model: info.model_config,
      batch: info.training_memory.batch,
      steps: 3,
      totalSteps: STEPS,
    });
    assert.equal(r.crossOriginIsolated, false);
    assert.equal(r.capabilities.threads, false);
    assert.equal(r.capabilities.simd, true);
    assert.equal(r.choice.variant, 'simd');
    assert.equal(r.choice.threads, 1);
    assert.match(r.choice.reason, /not cross-origin isolated/);
    console.log(`# reason: ${r.choice.reason}`);
    assert.equal(r.build.variant, 'simd');
    assert.equal(r.build.threads, false);
    assert.equal(r.metrics.length, 3);
    for (let i = 0; i < 3; i++)
      assert.ok(relDiff(r.metrics[i].loss, native[i].train_loss) <= TOLERANCE, `step ${i + 1}`);
    ctx.assertNoErrors();
  });
});
