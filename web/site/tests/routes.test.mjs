// Every route renders without console errors, at phone and desktop widths (screenshots kept);
// /runs overlays a native metrics.jsonl and a checkpoint; /kernels runs the parity checks in
// the browser (WebGPU on SwiftShader against the WebAssembly engine; WebAssembly against native).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';

import { OUT, corpusPath, openSite, ptl, shootBoth } from './helpers.mjs';

// [route, its h1, the navigation entry marked current]
for (const [route, heading, nav = route] of [
  ['/', /Train a GPT/],
  ['/runs/', /Compare runs/],
  ['/learn/', /How it works/],
  ['/learn/model/', /The model: TinyGPT/, '/learn/'],
  ['/performance/', /Performance/],
  ['/kernels/', /Check the kernels/],
]) {
  test(`${route} renders without errors`, async () => {
    const s = await openSite({ route });
    try {
      assert.match(await s.page.textContent('h1'), heading);
      assert.equal(await s.page.getAttribute('nav a[aria-current="page"]', 'href'), nav);
      if (route === '/')
        await s.page.waitForFunction(() => document.body.dataset.ready === 'true', null, { timeout: 120000 });
      // Keyboard: the skip link is the first stop and moves focus to the content.
      await s.page.keyboard.press('Tab');
      assert.equal(await s.page.evaluate(() => document.activeElement?.className), 'skip');
      await shootBoth(s.page, `route${route.replace(/\//g, '-').replace(/-$/, '') || '-index'}`);
      s.assertNoErrors(route);
    } finally {
      await s.close();
    }
  });
}

test('/runs overlays a native metrics.jsonl and a checkpoint; a bad file is reported', async () => {
  const dir = path.join(OUT, 'runs-native');
  fs.rmSync(dir, { recursive: true, force: true });
  ptl([
    'train',
    '--preset',
    'tiny',
    '--steps',
    '40',
    '--data',
    corpusPath(),
    '--out',
    dir,
    '--eval-every',
    '10',
    '--sample-every',
    '0',
  ]);
  const s = await openSite({ route: '/runs/' });
  try {
    await s.page.setInputFiles('#runs-files', [path.join(dir, 'metrics.jsonl'), path.join(dir, 'model.tinygpt')]);
    await s.page.waitForFunction(() => document.body.dataset.runs === '2');
    const rows = await s.page.locator('#runs-table tbody tr').allTextContents();
    assert.equal(rows.length, 2);
    assert.match(rows[0], /^metrics\.jsonl40/);
    assert.match(rows[1], /^model\.tinygpt40/);
    assert.equal(await s.page.locator('#runs-chart canvas').count(), 1);
    await shootBoth(s.page, 'runs-two');
    await s.page.setInputFiles('#runs-files', {
      name: 'notes.jsonl',
      mimeType: 'text/plain',
      buffer: Buffer.from('{"hello": 1}\n'),
    });
    await s.page.waitForFunction(() => document.getElementById('runs-status').className === 'status error');
    assert.match(await s.page.textContent('#runs-status'), /notes\.jsonl, line 1: no "step" number/);
    s.assertNoErrors('/runs');
  } finally {
    await s.close();
  }
});

// Each kernel's first case: every kernel compiled by Chromium and checked once. All 123 cases run in
// the WebGPU stage (Node, the same checks.ts); the whole set here took 109 s of CI on SwiftShader.
test('/kernels runs each WebGPU kernel and the WebAssembly checks in the browser', async () => {
  const s = await openSite({ route: '/kernels/' });
  try {
    await s.page.check('#checks-quick');
    await s.page.click('#run-checks');
    await s.page.waitForFunction(() => ['passed', 'failed'].includes(document.body.dataset.checks), null, {
      timeout: 15 * 60 * 1000,
    });
    await shootBoth(s.page, 'kernels-done');
    const status = await s.page.textContent('#checks-status');
    const failed = await s.page.locator('td', { hasText: /^FAIL$/ }).count();
    assert.equal(
      await s.page.evaluate(() => document.body.dataset.checks),
      'passed',
      `${status} (${failed} failing rows)`,
    );
    const passed = Number(await s.page.evaluate(() => document.body.dataset.kernelsPassed));
    const total = Number(await s.page.evaluate(() => document.body.dataset.kernelsTotal));
    assert.ok(total >= 16, `at least the 16 kernels of the training program (got ${total})`);
    assert.equal(passed, total);
    const cases = Number(await s.page.evaluate(() => document.body.dataset.casesTotal));
    assert.equal(cases, total, 'one case per kernel');
    assert.equal(await s.page.locator('#wasm-table td', { hasText: /^pass$/ }).count(), 2);
    s.assertNoErrors('/kernels');
  } finally {
    await s.close();
  }
});
