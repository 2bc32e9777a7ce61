// The harness itself: the static server's MIME types and isolation headers, and the launcher's
// error collection, in the real headless Chromium.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';

import { assertNoErrors, launchChromium, startServer } from './lib/index.mjs';

let dir, browser;
before(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ptl-harness-'));
  fs.writeFileSync(
    path.join(dir, 'index.html'),
    '<!doctype html><title>t</title><script type="module" src="./m.mjs"></script>',
  );
  fs.writeFileSync(path.join(dir, 'm.mjs'), 'window.loaded = true;');
  fs.writeFileSync(
    path.join(dir, 'bad.html'),
    "<!doctype html><script>console.error('boom'); throw new Error('uncaught boom');</script>",
  );
  // (module (func (export "f") (result i32) i32.const 42))
  fs.writeFileSync(
    path.join(dir, 'f.wasm'),
    Buffer.from([
      0, 97, 115, 109, 1, 0, 0, 0, 1, 5, 1, 96, 0, 1, 127, 3, 2, 1, 0, 7, 5, 1, 1, 102, 0, 0, 10, 6, 1, 4, 0, 65, 42,
      11,
    ]),
  );
  browser = await launchChromium();
});
after(async () => {
  await browser?.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

test('server: MIME types, isolation headers per instance, 404 and no escape from the root', async () => {
  const iso = await startServer({ mounts: { '/': dir, '/sub': dir }, isolated: true });
  const plain = await startServer({ mounts: { '/': dir }, isolated: false });
  try {
    assert.notEqual(iso.port, plain.port);
    const w = await fetch(`${iso.url}/sub/f.wasm`);
    assert.equal(w.headers.get('content-type'), 'application/wasm');
    assert.equal(w.headers.get('cross-origin-opener-policy'), 'same-origin');
    assert.equal(w.headers.get('cross-origin-embedder-policy'), 'require-corp');
    assert.equal((await WebAssembly.instantiate(await w.arrayBuffer())).instance.exports.f(), 42);
    const m = await fetch(`${plain.url}/m.mjs`);
    assert.match(m.headers.get('content-type'), /^text\/javascript/);
    assert.equal(m.headers.get('cross-origin-opener-policy'), null);
    assert.equal(m.headers.get('cross-origin-embedder-policy'), null);
    assert.match((await fetch(`${plain.url}/`)).headers.get('content-type'), /^text\/html/); // folder -> index.html
    assert.equal((await fetch(`${plain.url}/missing.js`)).status, 404);
    assert.equal((await fetch(`${plain.url}/..%2f..%2fetc%2fpasswd`)).status, 403);
    assert.equal((await fetch(`${plain.url}/f.wasm`, { method: 'POST' })).status, 405);
  } finally {
    await iso.close();
    await plain.close();
  }
});

test('chromium: crossOriginIsolated follows the server; WebAssembly streaming works; no errors', async () => {
  for (const isolated of [true, false]) {
    const server = await startServer({ mounts: { '/': dir }, isolated });
    try {
      const { page, errors } = await browser.newPage();
      await page.goto(server.url + '/');
      await page.waitForFunction(() => window.loaded === true);
      const r = await page.evaluate(async () => ({
        coi: self.crossOriginIsolated,
        sab: typeof SharedArrayBuffer === 'function',
        f: (await WebAssembly.instantiateStreaming(fetch('/f.wasm'))).instance.exports.f(),
      }));
      assert.deepEqual(r, { coi: isolated, sab: isolated, f: 42 });
      assertNoErrors(errors);
      await page.close();
    } finally {
      await server.close();
    }
  }
});

test('chromium: console errors, uncaught exceptions and failed loads are collected', async () => {
  const server = await startServer({ mounts: { '/': dir }, isolated: false });
  try {
    const { page, errors } = await browser.newPage();
    await page.goto(server.url + '/bad.html');
    await page.evaluate(() => fetch('/nope.js').catch(() => {}));
    await page.waitForTimeout(200);
    assert.ok(
      errors.some((e) => /console\.error: boom/.test(e)),
      errors.join('\n'),
    );
    assert.ok(
      errors.some((e) => /uncaught: uncaught boom/.test(e)),
      errors.join('\n'),
    );
    assert.ok(
      errors.some((e) => /HTTP 404: .*nope\.js/.test(e)),
      errors.join('\n'),
    );
    assert.throws(() => assertNoErrors(errors), /reported \d+ error/);
    await page.close();
  } finally {
    await server.close();
  }
});

test('chromium: WebGPU on SwiftShader gives an adapter', async () => {
  const server = await startServer({ mounts: { '/': dir }, isolated: true });
  try {
    const { page, errors } = await browser.newPage();
    await page.goto(server.url + '/');
    const r = await page.evaluate(async () => {
      if (!navigator.gpu) return { gpu: false };
      const adapter = await navigator.gpu.requestAdapter();
      return { gpu: true, adapter: !!adapter, subgroups: adapter ? adapter.features.has('subgroups') : false };
    });
    assert.equal(r.gpu, true, 'navigator.gpu missing: the WebGPU flags did not apply');
    assert.equal(r.adapter, true, 'no WebGPU adapter (SwiftShader)');
    // A failed adapter request may log; the page itself must be clean.
    assertNoErrors(errors);
    await page.close();
  } finally {
    await server.close();
  }
});
