// Memory64 in Chromium (issue 4, item 4): one training step of a model whose state (weights,
// gradients, two AdamW moments: 16 bytes per parameter) exceeds 4 GiB, in a Web Worker with the
// memory64 build; the loss must be finite and equal native `ptl train`'s first loss on the same
// batch (same seed), and the page must report no error (no BigInt/Number mixing in the glue).
//
// Slow (minutes on 2 cores: the memory64 build is scalar and single-threaded, and native writes a
// 4.5 GB checkpoint), so it is not in the default run: `tests/browser/run.sh --slow`.
// Needs about 6 GiB free memory for Chromium plus 5 GiB for native (one after the other).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';

import { BUILD_DIR, dataFile, openEnginePage, ptl, readMetrics, relDiff, tmpDir } from './helpers.mjs';

// The smallest simple config past 4 GiB of state: 283.7 M parameters (16 bytes each: 4.23 GiB),
// one sequence of 8 tokens per batch so that the step itself stays cheap.
const MODEL = { n_layers: 10, d_model: 1536, n_heads: 12, ctx: 8 };
const BATCH = 1;
const GiB = 2 ** 30;

let ctx;
before(async () => {
  const f = path.join(BUILD_DIR, 'memory64', 'ptl_engine.wasm');
  if (!fs.existsSync(f)) throw new Error(`${f} missing: run tests/browser/run.sh --slow (or wasm/build.sh memory64)`);
  ctx = await openEnginePage({ isolated: false }); // Memory64 needs no isolation (single thread)
});
after(async () => ctx?.close());

test("memory64 in Chromium: one step of a model with more than 4 GiB of state equals native's loss", async () => {
  const t0 = Date.now();
  const r = await ctx.page.evaluate(
    async ({ model, batch }) => {
      const T = window.ptlTest;
      const choice = T.selectBuild({ model, batch });
      const times = {};
      let t = performance.now();
      const { client, build } = await T.startEngine({ variant: choice.variant });
      times.load = performance.now() - t;
      t = performance.now();
      const info = await client.call('create', {
        config: { preset: 'tiny', model, train: { batch, steps: 1, eval_every: 1000, sample_every: 0 } },
      });
      times.create = performance.now() - t;
      t = performance.now();
      await client.call('setCorpus', { corpus: await T.fetchBytes('/data/tinyshakespeare.txt') });
      times.corpus = performance.now() - t;
      t = performance.now();
      const metrics = await client.call('train', { steps: 1 });
      times.train = performance.now() - t;
      const { capabilities, ...rest } = choice;
      return { choice: rest, memory64: capabilities.memory64, build, info, metrics, times };
    },
    { model: MODEL, batch: BATCH },
  );
  const wasmS = (Date.now() - t0) / 1000;
  assert.equal(r.memory64, true, 'this Chromium does not validate a 64-bit memory');
  assert.equal(r.choice.variant, 'memory64', r.choice.reason);
  assert.equal(r.build.memory64, true);
  assert.ok(r.info.param_count * 16 > 4 * GiB, `state ${(r.info.param_count * 16) / GiB} GiB is not past 4 GiB`);
  const loss = r.metrics[0].loss;
  assert.ok(Number.isFinite(loss), `loss ${loss}`);

  const t1 = Date.now();
  const out = tmpDir('ptl-m64-native-');
  let native;
  try {
    ptl([
      'train',
      '--preset',
      'tiny',
      '--layers',
      String(MODEL.n_layers),
      '--d-model',
      String(MODEL.d_model),
      '--heads',
      String(MODEL.n_heads),
      '--ctx',
      String(MODEL.ctx),
      '--batch',
      String(BATCH),
      '--steps',
      '1',
      '--eval-every',
      '1000',
      '--sample-every',
      '0',
      '--data',
      dataFile(),
      '--out',
      out,
    ]);
    native = readMetrics(out)[0].train_loss;
  } finally {
    fs.rmSync(out, { recursive: true, force: true });
  }
  const nativeS = (Date.now() - t1) / 1000;
  const d = relDiff(loss, native);
  console.log(
    `# memory64 in Chromium ${ctx.browser.version()}: ${(r.info.param_count / 1e6).toFixed(1)} M parameters, ` +
      `state ${((r.info.param_count * 16) / GiB).toFixed(2)} GiB (selectBuild: ${r.choice.reason}); ` +
      `loss ${loss} vs native ${native} (relative ${d.toExponential(2)}); ` +
      `wasm: load ${(r.times.load / 1000).toFixed(1)} s, create ${(r.times.create / 1000).toFixed(1)} s, ` +
      `corpus ${(r.times.corpus / 1000).toFixed(1)} s, 1 step ${(r.times.train / 1000).toFixed(1)} s, total ${wasmS.toFixed(0)} s; native run ${nativeS.toFixed(0)} s`,
  );
  assert.ok(d <= 1e-5, `loss ${loss} differs from native ${native} by ${d} relative`);
  ctx.assertNoErrors();
});
