// What the site does when storage or a file lets it down, in headless Chromium: the browser's
// storage quota full during an autosave, a tab closed while an autosave is written, a damaged
// autosave, and a dropped or opened file that is not a checkpoint (a text, a checkpoint cut short,
// a LoRA adapter) on the playground and on /runs. Each gives a message naming the problem and
// keeps the previous good state.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';

import { OUT, corpusPath, losses, openSite, ptl, shoot, waitIdleAt, waitReady } from './helpers.mjs';

const openDetails = (page) => page.evaluate(() => document.querySelectorAll('details').forEach((d) => (d.open = true)));

/** Sets up a Tiny run on threaded WebAssembly: saves every 10 steps, no validation or samples. */
async function setUpRun(page, steps) {
  await openDetails(page);
  await page.selectOption('#backend', 'wasm-threads');
  await page.selectOption('#preset', 'tiny');
  await page.fill('#steps', String(steps));
  await page.fill('#eval-every', '0');
  await page.fill('#sample-every', '0');
  await page.fill('#autosave-every', '10');
}

/** Trains such a run of 10 steps and waits for its autosave of step 10. */
async function trainToFirstAutosave(page) {
  await setUpRun(page, 10);
  await page.click('#start');
  await waitIdleAt(page, 10);
  assert.equal(await page.evaluate(() => document.body.dataset.autosaved), '10');
}

/** The autosave's files in the origin-private file system: name -> size. */
const opfsFiles = (page) =>
  page.evaluate(async () => {
    const out = {};
    let dir;
    try {
      dir = await (await navigator.storage.getDirectory()).getDirectoryHandle('posttrainllm');
    } catch {
      return out; // none: nothing saved, or discarded
    }
    for await (const [name, h] of dir.entries()) out[name] = (await h.getFile()).size;
    return out;
  });

/** Replaces the autosaved run's bytes in OPFS by what `how` makes of them (every file but the text). */
async function damageAutosave(page, how) {
  await page.evaluate(async (how) => {
    const dir = await (await navigator.storage.getDirectory()).getDirectoryHandle('posttrainllm');
    for await (const [name, file] of dir.entries()) {
      if (!/^autosave\.(ptlrun|json|tinygpt)$/.test(name)) continue; // the run (and an earlier layout's)
      const bytes = new Uint8Array(await (await file.getFile()).arrayBuffer());
      let out;
      if (how === 'garbage') out = new TextEncoder().encode('this is not an autosave at all, just text\n');
      else if (how === 'truncate') out = bytes.slice(0, bytes.length >> 1);
      else {
        out = bytes.slice();
        if (out.length > 2000) out[out.length - 1000] ^= 0x40; // one bit of a tensor near the checkpoint's end
      }
      const w = await file.createWritable();
      await w.write(out);
      await w.close();
    }
  }, how);
}

/** Drops a file (its bytes from Node) on the page's body, as a drag from the desktop does. */
async function dropFile(page, name, bytes) {
  await page.evaluate(
    ({ name, b64 }) => {
      const bin = atob(b64);
      const data = Uint8Array.from(bin, (c) => c.charCodeAt(0));
      const dt = new DataTransfer();
      dt.items.add(new File([data], name));
      document.body.dispatchEvent(new DragEvent('drop', { dataTransfer: dt, bubbles: true, cancelable: true }));
    },
    { name, b64: Buffer.from(bytes).toString('base64') },
  );
}

test('storage quota full: the autosave fails with a message, training goes on, the previous autosave is kept and restored', async () => {
  const s = await openSite();
  const { page } = s;
  try {
    await waitReady(page);
    await trainToFirstAutosave(page);
    // A real quota (Chromium's, through DevTools): what is stored now and half a run file more.
    // Each save writes a whole new run file before the old one goes, so the next one cannot fit.
    const files = await opfsFiles(page);
    const run = Object.entries(files)
      .filter(([name]) => !name.includes('corpus'))
      .reduce((sum, [, size]) => sum + size, 0);
    assert.ok(run > 100_000, `a run file of step 10 (files: ${JSON.stringify(files)})`);
    const usage = await page.evaluate(async () => (await navigator.storage.estimate()).usage);
    const cdp = await page.context().newCDPSession(page);
    const origin = new URL(page.url()).origin;
    await cdp.send('Storage.overrideQuotaForOrigin', { origin, quotaSize: usage + Math.floor(run / 2) });

    await page.fill('#steps', '40');
    await page.click('#resume');
    await waitIdleAt(page, 40);
    // Every save from step 20 on failed; the run trained to its end all the same.
    assert.equal((await losses(page)).length, 40, 'training went on after the failed autosaves');
    assert.match(await page.textContent('#status'), /^Finished 40 steps on WebAssembly/);
    const warning = await page.textContent('#autosave-status');
    assert.ok(await page.isVisible('#autosave-status'), 'the autosave warning is shown');
    assert.match(
      warning,
      /^Autosave failed at step 40: the browser's storage for this site is full \(QuotaExceededError: [^)]*[^.]\)\. The previous autosave, step 10, is kept \(a reload restores it\)\. Training goes on/,
    );
    assert.equal(await page.evaluate(() => document.body.dataset.autosaved), '10', 'no save after step 10 worked');
    await shoot(page, 'storage-quota-full-1440');
    // Nothing of the failed saves is left behind (the swap files went), and the run file is step 10's.
    assert.deepEqual(await opfsFiles(page), files);

    await page.reload();
    await waitReady(page);
    assert.equal(await page.evaluate(() => document.body.dataset.restored), '10');
    assert.match(await page.textContent('#restore-text'), /autosaved at step 10 of 10/);
    assert.equal((await losses(page)).length, 10, "the restored curve is step 10's");
    s.assertNoErrors('the playground (quota)');
  } finally {
    await s.close();
  }
});

test('a tab closed while an autosave is written: the reopened page restores the previous autosave', async () => {
  const s = await openSite();
  const { page } = s;
  try {
    // The training worker's second write of the run file writes its header and half the rest,
    // then never finishes (a slow disk): the tab is closed meanwhile.
    await page.route(/session-worker[^/]*\.js$/, async (route) => {
      const r = await route.fetch();
      const hang = `(() => {
        const create = FileSystemFileHandle.prototype.createWritable;
        const writes = {};
        FileSystemFileHandle.prototype.createWritable = async function (...args) {
          const w = await create.apply(this, args);
          if (!/^autosave\\.(ptlrun|tinygpt)$/.test(this.name)) return w;
          writes[this.name] = (writes[this.name] ?? 0) + 1;
          if (writes[this.name] < 2) return w;
          const write = w.write.bind(w);
          let chunk = 0;
          w.write = async (data) => {
            if (chunk++ === 0 && data.byteLength < 1000) return write(data);
            await write(data.subarray(0, data.byteLength >> 1));
            self.ptlWriteHangs = this.name;
            return new Promise(() => {});
          };
          return w;
        };
      })();\n`;
      await route.fulfill({ response: r, body: hang + (await r.text()) });
    });
    await page.reload();
    await waitReady(page);
    await setUpRun(page, 200);
    await page.click('#start');
    await page.waitForFunction(() => document.body.dataset.autosaved === '10');
    const worker = page.workers().find((w) => w.url().includes('session-worker'));
    assert.ok(worker, 'the training worker');
    for (let t0 = Date.now(); !(await worker.evaluate(() => self.ptlWriteHangs ?? null));) {
      assert.ok(Date.now() - t0 < 120_000, 'the second autosave started writing');
      await new Promise((r) => setTimeout(r, 200));
    }
    const step = Number(await page.evaluate(() => document.body.dataset.step));
    assert.ok(step >= 20 && step < 30, `the run stands at the second autosave (step ${step})`);
    // The half-written save is in Chromium's swap file beside the run file, which is step 10's.
    const files = await opfsFiles(page);
    assert.ok(files['autosave.ptlrun.crswap'] > 0, `a save in flight (files: ${JSON.stringify(files)})`);
    delete files['autosave.ptlrun.crswap'];
    await page.close();

    const { page: again, errors } = await s.browser.newPage();
    again.setDefaultTimeout(3 * 60 * 1000);
    await again.goto(s.server.url + '/');
    await waitReady(again);
    assert.equal(await again.evaluate(() => document.body.dataset.restored), '10', 'the autosave of step 10');
    assert.deepEqual(await opfsFiles(again), files, 'the files of step 10, the swap file gone');
    assert.equal((await losses(again)).length, 10);
    assert.match(await again.textContent('#status'), /^Restored the autosaved run at step 10\./);
    // It resumes from there.
    await again.click('#restore-resume');
    await again.waitForFunction(() => Number(document.body.dataset.step ?? 0) >= 12);
    await again.click('#pause');
    await again.waitForFunction(() => document.body.dataset.state === 'ready');
    assert.ok((await losses(again)).length >= 12);
    assert.deepEqual(errors, [], 'the reopened page reports no errors');
  } finally {
    await s.close();
  }
});

test('a damaged autosave: the page loads, names the damage and offers to discard it; the rest works', async () => {
  const s = await openSite();
  const { page } = s;
  try {
    await waitReady(page);
    await trainToFirstAutosave(page);
    const cases = [
      ['garbage', /the autosave file \(42 bytes\) does not start with the autosave's signature/],
      ['truncate', /the autosave is [\d,]+ bytes where its header says [\d,]+: it was cut short/],
      ['flip', /the autosave's checkpoint does not match its SHA-256: its bytes changed after they were written/],
    ];
    for (const [how, why] of cases) {
      // Each case starts from a whole autosave: the same run saved again.
      if (how !== 'garbage') {
        await trainToFirstAutosave(page);
      }
      await damageAutosave(page, how);
      await page.reload();
      await waitReady(page);
      const text = await page.textContent('#restore-text');
      assert.match(text, /^Your autosaved run could not be restored: /, how);
      assert.match(text, why, how);
      assert.ok(await page.isVisible('#restore-banner'), `${how}: the banner`);
      assert.ok(await page.isHidden('#restore-resume'), `${how}: nothing to resume`);
      assert.ok(await page.isVisible('#restore-discard'), `${how}: Discard is offered`);
      assert.match(await page.textContent('#status'), /^Could not restore the autosave: /);
      assert.equal(await page.getAttribute('#status', 'class'), 'status warn');
      assert.equal(await page.evaluate(() => document.body.dataset.restored), undefined);
      // The rest of the page is there: the training text loaded, no model, Start enabled.
      await page.waitForFunction(() => document.body.dataset.corpus === 'TinyShakespeare');
      assert.equal(await page.evaluate(() => document.body.dataset.state), 'empty');
      assert.ok(await page.isEnabled('#start'));
      if (how === 'garbage') await shoot(page, 'storage-damaged-autosave-1440');
    }
    // Discard deletes it: the next load finds no autosave.
    await page.click('#restore-discard');
    await page.waitForFunction(() => document.body.dataset.autosaveDiscarded === 'true');
    assert.match(await page.textContent('#status'), /^Discarded the damaged autosave\./);
    assert.deepEqual(await opfsFiles(page), {});
    await page.reload();
    await waitReady(page);
    assert.ok(await page.isHidden('#restore-banner'));
    assert.equal(await page.evaluate(() => document.body.dataset.restoreFailed), undefined);
    // A new run trains and autosaves.
    await trainToFirstAutosave(page);
    assert.equal((await losses(page)).length, 10);
    s.assertNoErrors('the playground (damaged autosave)');
  } finally {
    await s.close();
  }
});

test('a file that is not a checkpoint, dropped or opened: a text, a checkpoint cut short, an adapter; the model stays, /runs names each', async () => {
  // A checkpoint, and an adapter of it (two LoRA steps on TinyShakespeare), from native ptl.
  const dir = path.join(OUT, 'storage-faults');
  fs.rmSync(dir, { recursive: true, force: true });
  fs.mkdirSync(dir, { recursive: true });
  const base = path.join(OUT, 'pretrained/model.tinygpt');
  assert.ok(fs.existsSync(base), `${base}: run.sh trains it`);
  ptl(['lora', 'train', '--base', base, '--data', corpusPath(), '--steps', '2', '--out', path.join(dir, 'ad')]);
  const adapter = fs.readFileSync(path.join(dir, 'ad/adapter.tinygpt-lora'));
  const model = fs.readFileSync(base);
  const cut = model.subarray(0, model.length - 4096);
  const text = Buffer.from('First Citizen:\nBefore we proceed any further, hear me speak.\n');

  const s = await openSite({ ignore: [/not a safetensors|Could not open|truncated|LoRA adapter/i] });
  const { page } = s;
  try {
    await waitReady(page);
    await page.setInputFiles('#open-file', base);
    await page.waitForFunction(() => document.body.dataset.opened === 'model.tinygpt');
    const greedy = async () => {
      await page.fill('#prompt', 'ROMEO:');
      await page.fill('#temperature', '0');
      await page.fill('#length', '40');
      await page.evaluate(() => (document.getElementById('gen-stats').textContent = ''));
      await page.click('#generate');
      await page.waitForFunction(() => document.getElementById('gen-stats').textContent.startsWith('40 bytes'));
      return page.textContent('#gen-out');
    };
    const before = await greedy();

    const bad = [
      [
        'notes.txt',
        text,
        /^Could not open notes\.txt: .*not a safetensors file .*\. The current model is unchanged\. It looks like text: to train on it, choose "Upload a \.txt file" under Training text\.$/,
      ],
      [
        'cut.tinygpt',
        cut,
        /^Could not open cut\.tinygpt: .*the file is shorter than its header says \(truncated\?\)\. The current model is unchanged\.$/,
      ],
      [
        'adapter.tinygpt-lora',
        adapter,
        /^Could not open adapter\.tinygpt-lora: .*this is a LoRA adapter, not a model checkpoint .*The current model is unchanged\.$/,
      ],
    ];
    for (const [name, bytes, message] of bad) {
      for (const how of ['drop', 'open']) {
        await page.evaluate(() => (document.getElementById('status').textContent = ''));
        if (how === 'drop') await dropFile(page, name, bytes);
        else await page.setInputFiles('#open-file', { name, mimeType: 'application/octet-stream', buffer: bytes });
        await page.waitForFunction((n) => document.getElementById('status').textContent.includes(n), name);
        assert.match(await page.textContent('#status'), message, `${name}, ${how}`);
        assert.equal(await page.getAttribute('#status', 'class'), 'status error');
        assert.equal(await page.evaluate(() => document.body.dataset.opened), 'model.tinygpt', `${name}, ${how}`);
      }
    }
    await shoot(page, 'storage-bad-drop-1440');
    // The model is the one opened before: the same greedy text, and it trains on.
    assert.equal(await greedy(), before, 'the same greedy text as before the bad files');
    assert.match(await page.textContent('#s-step'), /^60 \//);
    await openDetails(page);
    await page.fill('#steps', '63');
    await page.click('#resume');
    await waitIdleAt(page, 63);
    assert.equal((await losses(page)).length, 3, 'three more steps trained');
    // A good checkpoint dropped opens (the drop is a way in, not only a way to fail).
    await dropFile(page, 'dropped.tinygpt', model);
    await page.waitForFunction(() => document.body.dataset.opened === 'dropped.tinygpt');
    assert.equal(await greedy(), before);
    s.assertNoErrors('the playground (bad files)');

    // /runs: the good checkpoint is a run; each bad file is named and the run stays.
    const runs = await s.browser.newPage();
    await runs.page.goto(s.server.url + '/runs/');
    await runs.page.setInputFiles('#runs-files', base);
    await runs.page.waitForFunction(() => document.body.dataset.runs === '1');
    const runsBad = [
      [
        'notes.txt',
        text,
        /^Could not open: notes\.txt is neither a metrics\.jsonl nor a checkpoint \(read as a safetensors file, its header would be [\d,]+ bytes long, and the file has 61\)\. 1 run open\.$/,
      ],
      [
        'cut.tinygpt',
        cut,
        /^Could not open: cut\.tinygpt: the checkpoint is cut short \([\d,]+ bytes; its tensors end at byte [\d,]+\)\. 1 run open\.$/,
      ],
    ];
    for (const [name, bytes, message] of runsBad) {
      await runs.page.evaluate(() => (document.getElementById('runs-status').textContent = ''));
      await dropFile(runs.page, name, bytes);
      await runs.page.waitForFunction((n) => document.getElementById('runs-status').textContent.includes(n), name);
      assert.match(await runs.page.textContent('#runs-status'), message);
      assert.equal(await runs.page.locator('#runs-table tbody tr').count(), 1, `${name}: the open run stays`);
    }
    // An adapter is a run too: its fine-tuning's loss curve.
    await dropFile(runs.page, 'adapter.tinygpt-lora', adapter);
    await runs.page.waitForFunction(() => document.body.dataset.runs === '2');
    assert.match(await runs.page.textContent('#runs-table tbody tr:nth-child(2)'), /^adapter\.tinygpt-lora2/);
    await shoot(runs.page, 'storage-runs-bad-drop-1440');
    assert.deepEqual(runs.errors, [], '/runs reports no errors');
  } finally {
    await s.close();
  }
});
