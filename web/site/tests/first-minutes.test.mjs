// The playground's first minutes: what a visitor reads before and after a first run. Disabled
// panels say why, the steps guide, one backend line, the question before a trained model is
// thrown away, a resumed schedule that goes on where it was, labelled attention maps with a
// tooltip, status lines that follow the events, the WebGPU start's progress, whole loss curves
// of long runs, and the layout at 390 px.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';

import { OUT, corpusPath, losses, openSite, ptl, shoot, waitIdleAt, waitReady } from './helpers.mjs';

const openDetails = (page) => page.evaluate(() => document.querySelectorAll('details').forEach((d) => (d.open = true)));
const text = (page, sel) => page.textContent(sel).then((t) => t.trim());

/** Every text the status line showed from now on (a MutationObserver in the page). */
async function recordStatus(page) {
  await page.evaluate(() => {
    window.statusSeen = [];
    const el = document.getElementById('status');
    new MutationObserver(() => window.statusSeen.push(el.textContent)).observe(el, {
      childList: true,
      characterData: true,
      subtree: true,
    });
  });
  return () => page.evaluate(() => window.statusSeen);
}

test('before and after a first run: reasons, guide, one backend line, resume schedule, confirm, attention labels', async () => {
  const s = await openSite();
  const { page } = s;
  try {
    await waitReady(page);
    // c. The backend line: short, once. SwiftShader's adapter is a CPU one, so Auto takes WebAssembly.
    await page.selectOption('#backend', 'auto');
    await page.waitForFunction(() => document.body.dataset.backend === 'wasm');
    const backendLine = await text(page, '#backend-info');
    assert.match(
      backendLine,
      /^Auto chose WebAssembly \(SIMD, \d+ threads\)\. This browser's WebGPU \(.+\) runs on the CPU/,
    );
    assert.ok(backendLine.length < 200, `one short message (${backendLine.length} characters): ${backendLine}`);
    assert.equal((backendLine.match(/WebAssembly/g) ?? []).length, 1, `WebAssembly named once: ${backendLine}`);
    const statusLine = await text(page, '#status');
    assert.ok(!/Auto|WebGPU|threads/.test(statusLine), `the status line does not repeat it: ${statusLine}`);

    // a. Before any run, the panels that need a model use the build's pretrained model and say
    // so; without one they are disabled and say why and how to enable them.
    if (await page.isVisible('#pretrained-banner')) {
      assert.ok(await page.isEnabled('#generate'));
      assert.ok(await page.isEnabled('#inspect'));
      for (const id of ['#gen-why', '#inspect-why']) assert.ok(await page.isHidden(id), `${id} is hidden`);
      for (const id of ['#gen-model', '#inspect-model'])
        assert.match(await text(page, id), /^Uses the pretrained model \(.+\); the first use downloads it/);
    } else {
      assert.ok(await page.isDisabled('#generate'));
      assert.ok(await page.isDisabled('#inspect'));
      for (const id of ['#gen-why', '#inspect-why']) {
        assert.ok(await page.isVisible(id), `${id} is shown`);
        assert.match(await text(page, id), /^No model yet: press Start new run .* open a checkpoint/);
      }
    }
    // h. The fine-tune line guides too.
    assert.match(await text(page, '#ft-status'), /^Train or load a model first/);

    // b. How long to train: Tiny points to Small; Small and Medium give steps and this machine's time.
    await page.selectOption('#preset', 'medium');
    await page.waitForFunction(() =>
      /2,000 steps of Medium take about/.test(document.getElementById('steps-guide').textContent),
    );
    assert.match(await text(page, '#steps-guide'), /Medium learns more per step/);
    await page.selectOption('#preset', 'tiny');
    assert.match(await text(page, '#steps-guide'), /Tiny learns .* not words.* choose Small/);
    await page.selectOption('#preset', 'small');
    await page.waitForFunction(() =>
      /3,000 steps of Small take about/.test(document.getElementById('steps-guide').textContent),
    );
    assert.match(await text(page, '#steps-guide'), /mostly real words after about 1,500/);
    await shoot(page, 'first-minutes-guide-1440');

    // f. A finished 30-step run (lr 1e-3, cosine to 1e-4) resumed to 60 steps: the rate goes on
    // at the minimum it had reached instead of jumping back to the peak.
    await openDetails(page);
    await page.selectOption('#backend', 'wasm-threads');
    await page.selectOption('#preset', 'tiny');
    await page.fill('#steps', '30');
    await page.fill('#lr', '0.001');
    await page.fill('#eval-every', '10');
    await page.fill('#sample-every', '0');
    await page.fill('#autosave-every', '0');
    await page.click('#start');
    await waitIdleAt(page, 30);
    await page.fill('#steps', '60');
    await page.click('#resume');
    await waitIdleAt(page, 60);
    const lrs = await page.evaluate(() => window.ptlRun.lrs);
    assert.equal(lrs.length, 60);
    assert.ok(Math.abs(lrs[29] - 1e-4) < 5e-6, `step 30 ends near the minimum (${lrs[29]})`);
    for (let i = 30; i < 60; i++)
      assert.ok(Math.abs(lrs[i] - 1e-4) < 1e-9, `step ${i + 1}: lr ${lrs[i]} stays at 1e-4`);
    assert.equal((await losses(page)).length, 60);

    // a, h. With a model, the reasons go, the panels name the run, and the fine-tune line moves on.
    assert.ok(await page.isHidden('#gen-why'));
    assert.ok(await page.isHidden('#inspect-why'));
    assert.equal(await text(page, '#gen-model'), 'Uses your Tiny run, at step 60.');
    assert.match(await text(page, '#ft-status'), /^Choose the fine-tuning data/);

    // d. "Start new run" asks before it throws the trained model away: cancelled, nothing changes.
    let asked = '';
    page.once('dialog', (d) => {
      asked = d.message();
      void d.dismiss();
    });
    await page.click('#start');
    await page.waitForFunction(() => /Kept the current model/.test(document.getElementById('status').textContent));
    assert.match(asked, /discard the current model \(step 60\)\? It has not been downloaded/);
    assert.equal(await text(page, '#s-step'), '60 / 60');
    assert.equal((await losses(page)).length, 60, 'no new run');
    // Downloaded, it is kept: no question.
    const [download] = await Promise.all([page.waitForEvent('download'), page.click('#download')]);
    await download.saveAs(path.join(OUT, 'first-minutes.tinygpt'));
    const info = JSON.parse(ptl(['info', path.join(OUT, 'first-minutes.tinygpt'), '--json']));
    assert.equal(info.train_config.decay_from_step, 30, 'the checkpoint records where the cosine was stretched');
    const noDialog = (d) => assert.fail(`unexpected dialog: ${d.message()}`);
    page.on('dialog', noDialog);
    await page.fill('#steps', '4');
    await page.click('#start');
    await page.waitForFunction(() => document.body.dataset.state === 'ready' && window.ptlRun.losses.length === 4);
    page.off('dialog', noDialog);
    // Trained again and not downloaded: accepting the question starts the new run.
    page.once('dialog', (d) => void d.accept());
    await page.fill('#steps', '3');
    await page.click('#start');
    await page.waitForFunction(() => document.body.dataset.state === 'ready' && window.ptlRun.losses.length === 3);

    // g. Attention maps: byte labels on both axes, a tooltip with query, key and probability.
    await page.fill('#inspect-prompt', 'To be, or');
    await page.click('#inspect');
    await page.waitForFunction(
      () => !document.getElementById('inspect-out').hidden && document.body.dataset.state === 'ready',
    );
    const want = ['T', 'o', '␣', 'b', 'e', ',', '␣', 'o', 'r'];
    const first = page.locator('#attention .attn').first();
    assert.deepEqual(await first.locator('.cols span').allTextContents(), want, 'column labels');
    assert.deepEqual(await first.locator('.rows span').allTextContents(), want, 'row labels');
    await first.scrollIntoViewIfNeeded(); // the mouse moves within the viewport only
    const box = await first.locator('canvas').boundingBox();
    const cell = (i, j) => ({ x: box.x + ((j + 0.5) / 9) * box.width, y: box.y + ((i + 0.5) / 9) * box.height });
    // Row labels sit level with their rows, column labels above their columns.
    const rowLabel = await first.locator('.rows span').nth(4).boundingBox();
    assert.ok(Math.abs(rowLabel.y + rowLabel.height / 2 - cell(4, 0).y) < box.height / 9, 'row label 5 beside row 5');
    const colLabel = await first.locator('.cols span').nth(3).boundingBox();
    assert.ok(
      Math.abs(colLabel.x + colLabel.width / 2 - cell(0, 3).x) < box.width / 9,
      'column label 4 above column 4',
    );
    // The first byte can only attend to itself.
    await page.mouse.move(cell(0, 0).x, cell(0, 0).y);
    await page.waitForSelector('#attn-tip:not([hidden])', { timeout: 10000 });
    assert.equal(await text(page, '#attn-tip'), "Layer 1, head 1: query 'T' (byte 1) → key 'T' (byte 1): 100.0%");
    // Query 'e' (byte 5) on key 'b' (byte 4): the probability the engine computed.
    const p = await page.evaluate(() => window.ptlRun.inspect.attention[0][0][4 * 9 + 3]);
    await page.mouse.move(cell(4, 3).x, cell(4, 3).y);
    await page.waitForFunction(() => document.getElementById('attn-tip').textContent.includes('byte 5'));
    assert.equal(
      await text(page, '#attn-tip'),
      `Layer 1, head 1: query 'e' (byte 5) → key 'b' (byte 4): ${(p * 100).toFixed(1)}%`,
    );
    await page.mouse.move(cell(2, 6).x, cell(2, 6).y);
    await page.waitForFunction(() => document.getElementById('attn-tip').textContent.includes('byte 3'));
    assert.match(
      await text(page, '#attn-tip'),
      /query space \(byte 3\) → key space \(byte 7\): a later byte, never attended to/,
    );
    await shoot(page, 'first-minutes-attention-1440');

    // h. A backend switch replaces the line about the previous backend.
    await page.selectOption('#backend', 'wasm-single');
    await page.waitForFunction(() => document.body.dataset.variant === 'simd');
    await page.waitForFunction(() =>
      /^Switched to WebAssembly; the model \(step 3\) came along\.$/.test(
        document.getElementById('status').textContent,
      ),
    );
    s.assertNoErrors('the first minutes');
  } finally {
    await s.close();
  }
});

test('WebGPU: the start shows kernel compilation progress; a backend switch updates the stopped line', async () => {
  const s = await openSite();
  const { page } = s;
  try {
    await waitReady(page);
    await openDetails(page);
    await page.selectOption('#backend', 'webgpu');
    await page.waitForFunction(() => document.body.dataset.backend === 'webgpu');
    await page.selectOption('#preset', 'tiny');
    await page.fill('#steps', '3');
    await page.fill('#eval-every', '0');
    await page.fill('#sample-every', '0');
    await page.fill('#autosave-every', '0');
    const seen = await recordStatus(page);
    await page.click('#start');
    await waitIdleAt(page, 3);
    const lines = await seen();
    const compiling = lines.filter((l) => /^Compiling GPU kernels… \d+\/\d+$/.test(l));
    assert.ok(compiling.length >= 2, `compilation progress shown (status lines: ${lines.join(' | ')})`);
    const [n, m] = compiling
      .at(-1)
      .match(/(\d+)\/(\d+)/)
      .slice(1)
      .map(Number);
    assert.ok(n === m && m > 5, `the last progress line counts every kernel (${n}/${m})`);
    const iCompile = lines.findIndex((l) => l.startsWith('Compiling'));
    const iTraining = lines.lastIndexOf('Training on WebGPU…');
    assert.ok(iCompile >= 0 && iTraining > iCompile, 'progress first, then "Training on WebGPU…" with the first step');
    assert.match(await text(page, '#status'), /^Finished 3 steps on WebGPU/);
    // h. Switching backend replaces the line about WebGPU.
    await page.selectOption('#backend', 'wasm-threads');
    await page.waitForFunction(() => document.body.dataset.backend === 'wasm');
    await page.waitForFunction(() =>
      /^Switched to WebAssembly; the model \(step 3\) came along\.$/.test(
        document.getElementById('status').textContent,
      ),
    );
    s.assertNoErrors('WebGPU start');
  } finally {
    await s.close();
  }
});

test('a long run reopens with its whole curve, in the playground and on /runs', async () => {
  // 2,500 steps: a history point every 10th step is 250 points, more than the 200 a checkpoint
  // once kept; the curve must still start at step 10. The history is what is checked, so the
  // model is Tiny cut down (one layer, d 32, 2 rows of 32 bytes a step): its 2,500 steps take a
  // second, where Tiny's take most of this test's time.
  const dir = path.join(OUT, 'long-run');
  fs.rmSync(dir, { recursive: true, force: true });
  ptl([
    'train',
    '--preset',
    'tiny',
    '--layers',
    '1',
    '--d-model',
    '32',
    '--heads',
    '2',
    '--ctx',
    '32',
    '--batch',
    '2',
    '--steps',
    '2500',
    '--data',
    corpusPath(),
    '--out',
    dir,
    '--eval-every',
    '500',
    '--sample-every',
    '0',
  ]);
  const file = path.join(dir, 'model.tinygpt');
  const s = await openSite();
  try {
    await waitReady(s.page);
    await s.page.setInputFiles('#open-file', file);
    await s.page.waitForFunction(() => document.body.dataset.opened === 'model.tinygpt');
    const steps = [...new Set(await s.page.evaluate(() => window.ptlRun.chartSteps()))];
    assert.equal(steps[0], 10, `the curve starts at step 10 (first steps: ${steps.slice(0, 5).join(', ')})`);
    assert.equal(steps.at(-1), 2500);
    assert.ok(steps.length > 200, `${steps.length} points drawn`);
    await s.page.goto(
      s.page
        .url()
        .replace(/\/?$/, '/runs/')
        .replace(/\/\/runs\/$/, '/runs/'),
    );
    await s.page.setInputFiles('#runs-files', file);
    await s.page.waitForFunction(() => document.body.dataset.runs === '1');
    const row = s.page.locator('#runs-table tbody tr').first();
    assert.equal(await row.getAttribute('data-first-step'), '10', '/runs draws from step 10');
    assert.ok(Number(await row.getAttribute('data-points')) > 200);
    s.assertNoErrors('long run');
  } finally {
    await s.close();
  }
});

test('at 390 px no select is cut off or wider than its container', async () => {
  const s = await openSite({ width: 390, height: 900 });
  const { page } = s;
  try {
    await waitReady(page);
    await openDetails(page);
    for (const corpus of ['shakespeare', 'hf']) {
      await page.check(`input[name="corpus"][value="${corpus}"]`);
      const bad = await page.evaluate(() => {
        const out = [];
        const vw = document.documentElement.clientWidth;
        for (const el of document.querySelectorAll('select')) {
          if (!el.offsetParent) continue; // hidden
          const r = el.getBoundingClientRect();
          // The nearest box that clips or bounds it: its panel (or the page).
          const panel = el.closest('.panel') ?? document.body;
          const pr = panel.getBoundingClientRect();
          if (r.left < 0 || r.right > vw + 0.5 || r.left < pr.left - 0.5 || r.right > pr.right + 0.5)
            out.push(
              `#${el.id}: ${r.left.toFixed(0)}..${r.right.toFixed(0)} in ${pr.left.toFixed(0)}..${pr.right.toFixed(0)} (viewport ${vw})`,
            );
          // The select's box is wide enough for its chosen option's text (a select never wraps
          // it, and reports no overflow: measure the text in the select's font).
          const cs = getComputedStyle(el);
          const g = document.createElement('canvas').getContext('2d');
          g.font = `${cs.fontWeight} ${cs.fontSize} ${cs.fontFamily}`;
          const need =
            g.measureText(el.selectedOptions[0]?.textContent ?? '').width +
            parseFloat(cs.paddingLeft) +
            parseFloat(cs.paddingRight) +
            20; // the drop-down arrow
          if (need > el.clientWidth)
            out.push(`#${el.id}: its text is cut (needs ${need.toFixed(0)} px, has ${el.clientWidth})`);
        }
        if (document.documentElement.scrollWidth > vw)
          out.push(`the page scrolls sideways (${document.documentElement.scrollWidth} > ${vw})`);
        return out;
      });
      assert.deepEqual(bad, [], `selects at 390 px (${corpus})`);
    }
    await shoot(page, 'first-minutes-390');
    s.assertNoErrors('390 px');
  } finally {
    await s.close();
  }
});
