// The playground in headless Chromium (SwiftShader for WebGPU), served with COOP/COEP:
// training on WebAssembly and on WebGPU, samples, download and reopen, a corrupt file, resuming
// after a reload from the OPFS autosave, the pretrained model out of the box, and the page without
// isolation.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';

import { DIST, OUT, losses, openSite, ptl, shoot, shootBoth, waitIdleAt, waitReady } from './helpers.mjs';

const openDetails = (page) => page.evaluate(() => document.querySelectorAll('details').forEach((d) => (d.open = true)));

async function train(page, { steps, backend, evalEvery = 10, sampleEvery = steps, autosaveEvery = 10 }) {
  await openDetails(page);
  await page.selectOption('#backend', backend);
  await page.selectOption('#preset', 'tiny');
  await page.fill('#steps', String(steps));
  await page.fill('#eval-every', String(evalEvery));
  await page.fill('#sample-every', String(sampleEvery));
  await page.fill('#autosave-every', String(autosaveEvery));
  await page.click('#start');
  await waitIdleAt(page, steps);
}

/** A checkpoint file's metadata and float32 tensors (safetensors: u64 header length, JSON header, data). */
function readCheckpoint(file) {
  const bytes = fs.readFileSync(file);
  const n = Number(bytes.readBigUInt64LE(0));
  const header = JSON.parse(bytes.subarray(8, 8 + n).toString('utf8'));
  const tensors = new Map();
  for (const [name, t] of Object.entries(header)) {
    if (name === '__metadata__') continue;
    assert.equal(t.dtype, 'F32', `${name}: float32`);
    const [a, b] = t.data_offsets;
    const data = bytes.subarray(8 + n + a, 8 + n + b);
    tensors.set(name, new Float32Array(data.buffer.slice(data.byteOffset, data.byteOffset + data.byteLength)));
  }
  return { metadata: header.__metadata__ ?? {}, tensors };
}

function assertLearned(ls, steps, what) {
  assert.equal(ls.length, steps, `${what}: one loss per step`);
  assert.ok(ls.every(Number.isFinite), `${what}: finite losses`);
  const head = ls.slice(0, 3).reduce((a, b) => a + b) / 3;
  const tail = ls.slice(-3).reduce((a, b) => a + b) / 3;
  assert.ok(head > 5.3 && head < 5.8, `${what}: the first losses start near ln 256 (got ${head})`);
  assert.ok(tail < head - 0.3, `${what}: the loss falls (first ${head.toFixed(3)}, last ${tail.toFixed(3)})`);
}

test('WebAssembly: Tiny trains 30 steps, the loss falls, a sample appears; download, reopen, corrupt file', async () => {
  const s = await openSite({ ignore: [/not a safetensors|Could not open|header length/i] });
  const { page } = s;
  try {
    await waitReady(page);
    await shootBoth(page, 'playground-loaded');
    // Uploads: a file too short to train on is refused next to the control, naming the text that
    // training keeps using; a binary file loads with a warning.
    await page.check('input[name="corpus"][value="upload"]');
    await page.setInputFiles('#corpus-file', { name: 'empty.txt', mimeType: 'text/plain', buffer: Buffer.alloc(0) });
    await page.waitForFunction(() =>
      /Could not use empty\.txt: .*Training still uses TinyShakespeare/.test(
        document.getElementById('corpus-info').textContent,
      ),
    );
    const noise = Buffer.from(Array.from({ length: 4000 }, (_, i) => (i * 97 + 13) & 255));
    await page.setInputFiles('#corpus-file', {
      name: 'noise.bin',
      mimeType: 'application/octet-stream',
      buffer: noise,
    });
    await page.waitForFunction(() =>
      /^noise\.bin: 4,000 bytes .*not UTF-8 text/.test(document.getElementById('corpus-info').textContent),
    );
    await page.check('input[name="corpus"][value="shakespeare"]');
    await page.waitForFunction(() => document.body.dataset.corpus === 'TinyShakespeare');
    await train(page, { steps: 30, backend: 'wasm-threads' });
    assert.equal(await page.evaluate(() => document.body.dataset.backend), 'wasm');
    assert.equal(await page.evaluate(() => document.body.dataset.variant), 'simd-threads');
    assertLearned(await losses(page), 30, 'WebAssembly');
    assert.match(await page.textContent('#status'), /Finished 30 steps on WebAssembly \(simd-threads\)/);
    assert.ok((await page.locator('#samples li').count()) >= 1, 'a sample appears');
    assert.ok((await page.textContent('#samples pre')).length > 20, 'the sample has text');
    assert.match(await page.textContent('#s-val'), /^\d+\.\d+$/, 'validation loss shown');
    await shootBoth(page, 'playground-trained-wasm');

    // Sampling streams and reports its speed.
    await page.fill('#length', '60');
    await page.click('#generate');
    await page.waitForFunction(
      () =>
        document.body.dataset.state === 'ready' &&
        document.getElementById('gen-stats').textContent.includes('tokens/s'),
    );
    assert.ok((await page.textContent('#gen-out')).startsWith('ROMEO:'));
    assert.match(await page.textContent('#gen-stats'), /^60 bytes in .* first token after \d+ ms/);

    // Watch the model think: top-10 and one attention map per head and layer.
    await page.click('#inspect');
    await page.waitForFunction(() => !document.getElementById('inspect-out').hidden);
    assert.equal(await page.locator('#top10 .bar').count(), 10);
    assert.equal(await page.locator('#attention canvas').count(), 2 * 3, 'Tiny: 2 layers x 3 heads');
    await shootBoth(page, 'playground-inspect');

    // Download: native ptl reads it, at step 30.
    const [download] = await Promise.all([page.waitForEvent('download'), page.click('#download')]);
    const file = path.join(OUT, 'downloaded.tinygpt');
    await download.saveAs(file);
    const info = JSON.parse(ptl(['info', file, '--json']));
    assert.equal(info.train_state?.step ?? info.step, 30, 'ptl info: step 30');
    // ... and the page opens it again.
    await page.setInputFiles('#open-file', file);
    await page.waitForFunction(() => document.body.dataset.opened === 'downloaded.tinygpt');
    assert.match(await page.textContent('#status'), /Opened downloaded\.tinygpt: .* step 30/);
    // Its loss history is back on the chart, and its last losses in the boxes (those of step 30).
    assert.ok(Number(await page.getAttribute('body', 'data-history-rows')) > 0, 'loss history rows drawn');
    const last = info.last_loss;
    assert.equal(last.step, 30);
    assert.equal(await page.textContent('#s-loss'), last.train_loss.toFixed(4), "train loss box: the checkpoint's");
    assert.equal(await page.textContent('#s-val'), last.val_loss.toFixed(4), "val loss box: the checkpoint's");

    // A corrupt file: a clear error, and the current model is still there.
    await page.setInputFiles('#open-file', {
      name: 'broken.tinygpt',
      mimeType: 'application/octet-stream',
      buffer: Buffer.from('this is not a checkpoint at all, just text'),
    });
    await page.waitForFunction(() => document.getElementById('status').textContent.includes('broken.tinygpt'));
    const err = await page.textContent('#status');
    assert.match(err, /Could not open broken\.tinygpt: .+\. The current model is unchanged/);
    assert.equal(await page.getAttribute('#status', 'class'), 'status error');
    await shoot(page, 'playground-corrupt-file-1440');
    await page.fill('#length', '10');
    await page.click('#generate');
    await page.waitForFunction(
      () =>
        document.body.dataset.state === 'ready' &&
        document.getElementById('gen-stats').textContent.startsWith('10 bytes'),
    );
    s.assertNoErrors('the playground (WebAssembly)');
  } finally {
    await s.close();
  }
});

test('WebGPU (SwiftShader): auto skips a software adapter; chosen, Tiny trains 20 steps, the checkpoint keeps moments and history, reopened from step 10', async () => {
  const s = await openSite();
  const { page } = s;
  try {
    await waitReady(page);
    // SwiftShader emulates the GPU on the CPU, far slower than WebAssembly: Auto takes WebAssembly.
    await page.selectOption('#backend', 'auto');
    await page.waitForFunction(() => document.body.dataset.backend === 'wasm');
    assert.match(await page.textContent('#backend-info'), /WebGPU \(.*swiftshader.*\) runs on the CPU/i);
    await train(page, { steps: 20, backend: 'webgpu' });
    assert.equal(await page.evaluate(() => document.body.dataset.backend), 'webgpu');
    assert.match(await page.textContent('#backend-info'), /WebGPU/);
    assertLearned(await losses(page), 20, 'WebGPU');
    assert.ok((await page.locator('#samples li').count()) >= 1, 'a sample appears');
    assert.match(await page.textContent('#status'), /Finished 20 steps on WebGPU \(.*swiftshader.*\)/i);
    await shootBoth(page, 'playground-trained-webgpu');

    // The download carries what the GPU trained: AdamW's moments and the loss history (every 10th
    // step and the validations, with the train losses the GPU computed).
    const [download] = await Promise.all([page.waitForEvent('download'), page.click('#download')]);
    const file = path.join(OUT, 'downloaded-webgpu.tinygpt');
    await download.saveAs(file);
    const info = JSON.parse(ptl(['info', file, '--json']));
    assert.equal(info.step, 20);
    assert.equal(info.has_optimizer_state, true, 'AdamW moments in the WebGPU checkpoint');
    const ls = await losses(page);
    assert.equal(info.last_loss.step, 20);
    assert.ok(
      Math.abs(info.last_loss.train_loss - ls[19]) < 1e-6,
      `last train loss ${info.last_loss.train_loss} is the GPU's ${ls[19]}`,
    );
    assert.ok(Number.isFinite(info.last_loss.val_loss), 'a validation loss at step 20');
    // The engine recorded every GPU step: the history has a point every 10th step with the GPU's
    // train loss, and the validations (every 10 steps here) beside them.
    const ckpt = readCheckpoint(file);
    const history = JSON.parse(ckpt.metadata.loss_history);
    assert.deepEqual(
      history.map((p) => p[0]),
      [10, 20],
      'history points at steps 10 and 20',
    );
    const evals = await page.evaluate(() => window.ptlRun.evals);
    assert.equal(evals.length, 2, 'validations at steps 10 and 20');
    for (const [i, [step, train, val]] of history.entries()) {
      assert.ok(
        Math.abs(train - ls[step - 1]) < 1e-6,
        `step ${step}: history train loss ${train} is the GPU's ${ls[step - 1]}`,
      );
      assert.ok(
        Math.abs(val - evals[i]) < 1e-6,
        `step ${step}: history validation loss ${val} is the page's ${evals[i]}`,
      );
    }
    // AdamW's moments are the GPU's: one pair per parameter, the second moments not zero.
    const params = [...ckpt.tensors.keys()].filter((n) => !n.startsWith('optim.'));
    assert.ok(params.length > 0);
    for (const p of params) {
      for (const m of ['m', 'v'])
        assert.equal(
          ckpt.tensors.get(`optim.${m}.${p}`)?.length,
          ckpt.tensors.get(p).length,
          `optim.${m}.${p} in the checkpoint`,
        );
      assert.ok(
        ckpt.tensors.get(`optim.v.${p}`).some((x) => x > 0),
        `optim.v.${p} holds the GPU's second moments`,
      );
    }

    // Sampling and "watch the model think" on the GPU (generate / window / inspect programs).
    await page.fill('#length', '40');
    await page.click('#generate');
    await page.waitForFunction(
      () =>
        document.body.dataset.state === 'ready' &&
        document.getElementById('gen-stats').textContent.startsWith('40 bytes'),
    );
    await page.click('#inspect');
    await page.waitForFunction(
      () => !document.getElementById('inspect-out').hidden && document.body.dataset.state === 'ready',
    );
    assert.equal(await page.locator('#attention canvas').count(), 2 * 3);
    const topBytes = () => page.$$eval('#top10 > span:nth-child(3n+1)', (els) => els.map((e) => e.textContent));
    const gpuTop = await topBytes();
    assert.equal(gpuTop.length, 10);
    // The same weights on the CPU (switching backends brings the GPU's weights back): the same top 10.
    await page.selectOption('#backend', 'wasm-threads');
    await page.waitForFunction(() => document.body.dataset.backend === 'wasm');
    await page.click('#inspect');
    await page.waitForFunction(() => document.body.dataset.state === 'ready');
    assert.deepEqual(await topBytes(), gpuTop, 'top-10 next bytes agree between WebGPU and WebAssembly');

    // Reopened, the checkpoint's chart draws its whole curve: from step 10, the first history point.
    await page.setInputFiles('#open-file', file);
    await page.waitForFunction(() => document.body.dataset.opened === 'downloaded-webgpu.tinygpt');
    const drawn = await page.evaluate(() => window.ptlRun.chartSteps());
    assert.equal(drawn[0], 10, `the reopened chart starts at step 10 (steps drawn: ${drawn.join(', ')})`);
    assert.deepEqual([...new Set(drawn)], [10, 20]);
    s.assertNoErrors('the playground (WebGPU)');
  } finally {
    await s.close();
  }
});

test('reload mid-run: the autosaved run comes back from OPFS and resumes where it stopped', async () => {
  const s = await openSite();
  const { page } = s;
  try {
    await waitReady(page);
    await page.selectOption('#backend', 'wasm-threads');
    await page.selectOption('#preset', 'tiny');
    await page.fill('#steps', '400');
    await openDetails(page);
    await page.fill('#autosave-every', '10');
    await page.fill('#eval-every', '50');
    await page.fill('#sample-every', '0');
    await page.click('#start');
    await page.waitForFunction(() => Number(document.body.dataset.autosaved ?? 0) >= 20);
    await page.reload();
    await waitReady(page);
    const restored = Number(await page.evaluate(() => document.body.dataset.restored));
    assert.ok(restored >= 20, `restored at step ${restored}`);
    assert.ok(await page.isVisible('#restore-banner'));
    assert.match(await page.textContent('#restore-text'), new RegExp(`autosaved at step ${restored} of 400`));
    assert.equal((await losses(page)).length, restored, 'the restored run keeps its loss curve');
    await shootBoth(page, 'playground-restored');
    await page.click('#restore-resume');
    await page.waitForFunction((r) => Number(document.body.dataset.step ?? 0) >= r + 5, restored);
    await page.click('#pause');
    await page.waitForFunction(() => document.body.dataset.state === 'ready');
    const ls = await losses(page);
    assert.ok(ls.length >= restored + 5, 'training continued after the restored step');
    assert.match(await page.textContent('#status'), /Paused at step \d+/);
    await page.click('#resume');
    await page.waitForFunction(() => document.body.dataset.state === 'training');
    await page.click('#stop');
    await page.waitForFunction(() => document.body.dataset.state === 'ready');
    // Stop ends the run at the step reached: Steps says so, and raising it enables Resume.
    const stoppedAt = Number(await page.inputValue('#steps'));
    assert.equal(stoppedAt, Number(await page.evaluate(() => document.body.dataset.step)));
    assert.match(
      await page.textContent('#status'),
      new RegExp(`Stopped at step ${stoppedAt} .*raise Steps and press Resume`),
    );
    assert.ok(await page.isDisabled('#resume'));
    await page.fill('#steps', String(stoppedAt + 10));
    assert.ok(await page.isEnabled('#resume'), 'Resume is enabled once Steps is above the step reached');
    s.assertNoErrors('the playground (restore)');
  } finally {
    await s.close();
  }
});

test('a diverged run: the status names the step and the last good autosave; nothing saves the model; a reload brings the autosave back', async () => {
  const s = await openSite();
  const { page } = s;
  try {
    await waitReady(page);
    await train(page, { steps: 10, backend: 'wasm-threads', evalEvery: 10, sampleEvery: 0, autosaveEvery: 10 });
    assert.equal(await page.evaluate(() => document.body.dataset.autosaved), '10');
    // A learning rate of 1e30 blows the weights up on the first update: step 12's loss is NaN.
    await page.fill('#steps', '20');
    await page.fill('#lr', '1e30');
    await page.selectOption('#schedule', 'constant');
    await page.click('#resume');
    await page.waitForFunction(() => /diverged/.test(document.getElementById('status').textContent));
    assert.match(
      await page.textContent('#status'),
      /^Training stopped: training diverged at step 12: loss is NaN \(try a lower learning rate\); the last good autosave is step 10: reload the page to continue from it/,
    );
    assert.equal(await page.getAttribute('#status', 'class'), 'status error');
    await page.waitForFunction(() => document.body.dataset.state === 'ready');
    // The poisoned model is not downloaded.
    await page.click('#download');
    await page.waitForFunction(() => /not exported/.test(document.getElementById('status').textContent));
    assert.match(await page.textContent('#status'), /^Download: not exported: training diverged at step 12/);
    await shootBoth(page, 'playground-diverged');
    // The autosave is still step 10's, finite: the reload restores it.
    await page.reload();
    await waitReady(page);
    assert.equal(Number(await page.evaluate(() => document.body.dataset.restored)), 10);
    assert.ok((await losses(page)).every(Number.isFinite), 'the restored curve is finite');
  } finally {
    await s.close();
  }
});

test('without cross-origin isolation: single-thread WebAssembly, and the page says why', async () => {
  const s = await openSite({ isolated: false });
  const { page } = s;
  try {
    await waitReady(page);
    await page.selectOption('#backend', 'wasm-threads');
    await page.waitForFunction(() => document.body.dataset.variant === 'simd');
    assert.match(await page.textContent('#backend-info'), /not cross-origin isolated/);
    await train(page, { steps: 5, backend: 'wasm-threads', evalEvery: 5, sampleEvery: 0, autosaveEvery: 0 });
    assert.equal((await losses(page)).length, 5);
    await shoot(page, 'playground-not-isolated-1440');
    s.assertNoErrors('the playground without isolation');
  } finally {
    await s.close();
  }
});

test('switching to another engine build keeps the model and ends the old worker', async () => {
  const s = await openSite();
  const { page } = s;
  try {
    await waitReady(page);
    await train(page, { steps: 5, backend: 'wasm-threads', evalEvery: 5, sampleEvery: 0, autosaveEvery: 0 });
    const old = page.workers().find((w) => w.url().includes('session-worker'));
    assert.ok(old, 'the training worker is running');
    const closed = new Promise((resolve) => old.on('close', resolve));
    await page.selectOption('#backend', 'wasm-single');
    await page.waitForFunction(() => document.body.dataset.variant === 'simd');
    assert.match(await page.textContent('#backend-info'), /^WebAssembly \(SIMD, one thread\), as you asked\.$/);
    await page.waitForFunction(() => document.body.dataset.state === 'ready');
    assert.match(await page.textContent('#s-step'), /^5 \/ 5$/);
    await page.fill('#length', '20');
    await page.click('#generate');
    await page.waitForFunction(() => document.getElementById('gen-stats').textContent.startsWith('20 bytes'));
    // The threaded worker is ended, not left running (with its threads) beside the new one. It
    // joins its threads and closes itself (in about 0.2 s here); a terminate() alone of a worker
    // whose threads are parked in Atomics.wait took Chromium's forcible-termination delay (2 s).
    // Ended means: Playwright reported its close, or it no longer runs a line of JavaScript (an
    // evaluate in it fails). The second probe is there because CI twice saw no close event
    // within 15 s where every local run (idle or with both cores busy) had it within 0.2 s.
    let ended = false;
    closed.then(() => {
      ended = true;
    });
    const gone = () =>
      Promise.race([
        old
          .evaluate(() => true)
          .then(
            () => false,
            () => true,
          ),
        new Promise((r) => setTimeout(() => r(false), 1000)),
      ]);
    for (const t0 = Date.now(); !ended && Date.now() - t0 < 15000;) {
      if (await gone()) ended = true;
      else await new Promise((r) => setTimeout(r, 250));
    }
    assert.ok(
      ended,
      `the old training worker was terminated (workers now: ${page
        .workers()
        .map((w) => w.url())
        .join(', ')})`,
    );
    s.assertNoErrors('the playground (build switch)');
  } finally {
    await s.close();
  }
});

test('pretrained model out of the box: the banner describes it; with no run, the sampling panel talks to it', async (t) => {
  const s = await openSite();
  const { page } = s;
  try {
    await waitReady(page);
    if (!(await page.isVisible('#pretrained-banner'))) {
      t.skip('the site was built without a pretrained model (web/site/tests/run.sh builds one in)');
      return;
    }
    // The banner invites to talk to it and says what it is, from the checkpoint's metadata.
    const served = path.join(DIST, 'models/pretrained.tinygpt');
    const info = JSON.parse(ptl(['info', served, '--json']));
    const m = info.model_config;
    const banner = (await page.textContent('#pretrained-banner')).replace(/\s+/g, ' ');
    assert.match(banner, /Talk to a pretrained model/);
    assert.ok(banner.includes(`${m.n_layers} layers × d ${m.d_model}, context ${m.ctx}`), banner);
    assert.ok(banner.includes(`trained ${info.step.toLocaleString('en')} steps on TinyShakespeare`), banner);
    if (info.last_loss?.val_loss !== undefined)
      assert.ok(banner.includes(`validation loss ${info.last_loss.val_loss.toFixed(2)}`), banner);

    // No run trained or opened: the sampling panel offers the pretrained model and says so.
    const stepsBefore = await page.inputValue('#steps');
    assert.equal(await page.evaluate(() => document.body.dataset.state), 'empty');
    assert.ok(await page.isEnabled('#generate'), 'Generate is there to press');
    assert.ok(await page.isHidden('#gen-why'));
    assert.match(await page.textContent('#gen-model'), /^Uses the pretrained model \(.+\); the first use downloads it/);
    // Generate loads it once, then samples: greedy, the same bytes as native ptl from that file.
    await page.fill('#prompt', 'ROMEO:');
    await page.fill('#temperature', '0');
    await page.fill('#length', '40');
    await page.click('#generate');
    await page.waitForFunction(() => document.getElementById('gen-stats').textContent.startsWith('40 bytes'));
    assert.equal(await page.evaluate(() => document.body.dataset.opened), 'the pretrained model');
    assert.match(await page.textContent('#status'), /Opened the pretrained model: .* step \d+/);
    assert.match(await page.textContent('#gen-model'), /^Uses the pretrained model \(/);
    const text = await page.textContent('#gen-out');
    const native = ptl(['sample', served, '--prompt', 'ROMEO:', '--temperature', '0', '--max-tokens', '40', '--raw'], {
      encoding: 'latin1',
    });
    assert.equal(
      Buffer.from(text, 'utf8').toString('hex'),
      Buffer.from(native, 'latin1')
        .subarray(0, 6 + 40)
        .toString('hex'),
      'the page samples the pretrained model',
    );
    assert.equal(await page.inputValue('#steps'), stepsBefore, 'the training settings stay the default run');
    assert.ok(await page.isDisabled('#resume'), 'the pretrained model is not a run to resume');
    // A second Generate uses the loaded model: no second download.
    const downloads = [];
    page.on('request', (r) => r.url().endsWith('pretrained.tinygpt') && downloads.push(r.url()));
    await page.fill('#gen-seed', '7');
    await page.fill('#temperature', '0.8');
    await page.click('#generate');
    await page.waitForFunction(() => document.body.dataset.state === 'ready');
    assert.deepEqual(downloads, []);
    await shootBoth(page, 'playground-pretrained');
    s.assertNoErrors('the playground (pretrained)');
  } finally {
    await s.close();
  }
});

test('the built site has the _headers file for static hosts', () => {
  const h = fs.readFileSync(path.join(DIST, '_headers'), 'utf8');
  assert.match(h, /Cross-Origin-Opener-Policy: same-origin/);
  assert.match(h, /Cross-Origin-Embedder-Policy: require-corp/);
});
