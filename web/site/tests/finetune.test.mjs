// The Fine-tune panel: LoRA on the pretrained model with an uploaded text lowers the held-out
// loss on that text; base and fine-tuned samples appear side by side; the adapter downloads,
// native ptl reads it, and it loads back; an adapter for another base and a malformed JSONL line
// are refused with clear errors.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';

import { OUT, openSite, ptl, shootBoth, waitReady } from './helpers.mjs';

// A corpus unlike Shakespeare: one repetitive, recognisable style.
function styleText() {
  const animals = ['cat', 'dog', 'fox', 'owl', 'hen', 'cow'];
  const places = ['mat', 'log', 'box', 'hill', 'barn', 'pond'];
  const lines = [];
  for (let i = 0; i < 1200; i++)
    lines.push(`the ${animals[i % 6]} sat on the ${places[(i * 7) % 6]}. it was a good day.`);
  return lines.join('\n') + '\n';
}

test('Fine-tune: LoRA on the pretrained model, side-by-side samples, adapter out and back in, bad input refused', async (t) => {
  const dir = path.join(OUT, 'finetune');
  fs.rmSync(dir, { recursive: true, force: true });
  fs.mkdirSync(dir, { recursive: true });
  const text = path.join(dir, 'style.txt');
  fs.writeFileSync(text, styleText());
  const bad = path.join(dir, 'bad.jsonl');
  fs.writeFileSync(bad, '{"prompt": "a", "response": "b"}\n{"prompt": "c", "response": \n');
  // An adapter trained natively on another base.
  ptl(['init', '--preset', 'tiny', '--seed', '5', '--out', path.join(dir, 'other.tinygpt')]);
  ptl([
    'lora',
    'train',
    '--base',
    path.join(dir, 'other.tinygpt'),
    '--data',
    text,
    '--steps',
    '2',
    '--out',
    path.join(dir, 'other-lora'),
  ]);

  const s = await openSite({ ignore: [] });
  const { page } = s;
  try {
    await waitReady(page);
    if (!(await page.isVisible('#pretrained-banner'))) {
      t.skip('the site was built without a pretrained model');
      return;
    }
    await page.click('#load-pretrained');
    await page.waitForFunction(() => document.body.dataset.opened === 'the pretrained model');
    const fineTune = async (backend, steps) => {
      await page.selectOption('#backend', backend);
      await page.waitForFunction((b) => document.body.dataset.backend === b, backend === 'webgpu' ? 'webgpu' : 'wasm');
      await page.fill('#ft-steps', String(steps));
      await page.click('#ft-start');
      await page.waitForFunction(() => document.body.dataset.ft === 'training');
      await page.waitForFunction(() => document.body.dataset.ft !== 'training', null, { timeout: 8 * 60 * 1000 });
      const summary = await page.textContent('#ft-status');
      const m = summary.match(/^Fine-tuned (\d+) steps on (\w+), .*Held-out loss ([\d.]+) → ([\d.]+)/);
      assert.ok(m, summary);
      assert.equal(Number(m[1]), steps, summary);
      return { summary, where: m[2], before: Number(m[3]), after: Number(m[4]) };
    };
    await page.setInputFiles('#ft-file', text);
    await page.fill('#ft-lr', '0.01');
    await page.fill('#ft-rank', '2');
    for (const target of ['k', 'o', 'fc_in', 'fc_out']) await page.check(`input[name="ft-target"][value="${target}"]`);

    // WebGPU and WebAssembly fine-tune alike: the engine supplies the same batches and schedule
    // to both, so the held-out loss after 5 steps agrees within fp32 drift (the WebGPU
    // backend's target is 0.5% per step). SwiftShader is slow: few steps there (a LoRA step of
    // this model takes it about 3 s in Chromium, WebAssembly 35 ms).
    const gpu = await fineTune('webgpu', 5);
    assert.equal(gpu.where, 'WebGPU', gpu.summary);
    const cpu5 = await fineTune('wasm-threads', 5);
    assert.equal(cpu5.where, 'WebAssembly', cpu5.summary);
    assert.equal(cpu5.before, gpu.before, 'the same base loss');
    assert.ok(cpu5.after < cpu5.before, `5 steps lower the held-out loss: ${cpu5.summary}`);
    assert.ok(
      Math.abs(cpu5.after - gpu.after) / cpu5.after < 0.005,
      `WebGPU ${gpu.after} and WebAssembly ${cpu5.after} agree within 0.5%`,
    );

    // A longer run on WebAssembly: the adapter learns the new text.
    // (Measured: 4.68 -> 4.49 after 150 steps on this barely trained 60-step base; the CLI demo
    // in docs/post-training.md shows what a trained base gains.)
    const long = await fineTune('wasm-threads', 150);
    assert.ok(
      long.after < long.before - 0.1,
      `the held-out loss on the new text falls by at least 0.1 nats: ${long.summary}`,
    );
    assert.match(
      long.summary,
      /LoRA rank 2, alpha 8 on fc_in, fc_out, k, o, q, v: [\d,]+ trainable parameters \(\d+\.\d+% of the base's/,
    );

    await page.click('#ft-compare');
    await page.waitForFunction(() => document.getElementById('ft-out-tuned').textContent.length > 0);
    const base = await page.textContent('#ft-out-base');
    const tuned = await page.textContent('#ft-out-tuned');
    assert.ok(base.length > 50 && tuned.length > 50);
    assert.notEqual(base, tuned, 'the adapter changes the samples');
    await shootBoth(page, 'finetune-compare');

    const [download] = await Promise.all([page.waitForEvent('download'), page.click('#ft-download')]);
    const adapter = path.join(dir, 'adapter.tinygpt-lora');
    await download.saveAs(adapter);
    const about = ptl(['lora', 'info', adapter]);
    assert.match(about, /rank 2/);
    assert.match(about, /trained: +\d+ steps on style\.txt/, 'the adapter names the data it was trained on');

    await page.setInputFiles('#ft-adapter-file', adapter);
    await page.waitForFunction(() =>
      document.getElementById('ft-status').textContent.startsWith('Loaded adapter.tinygpt-lora'),
    );
    await page.setInputFiles('#ft-adapter-file', path.join(dir, 'other-lora', 'adapter.tinygpt-lora'));
    await page.waitForFunction(() => document.getElementById('ft-status').className.includes('error'));
    assert.match(
      await page.textContent('#ft-status'),
      /Could not load adapter\.tinygpt-lora: .*base.*Nothing changed/i,
    );

    await page.setInputFiles('#ft-file', bad);
    await page.click('#ft-start');
    await page.waitForFunction(
      () => document.getElementById('ft-status').className.includes('error') && document.body.dataset.ft !== 'training',
    );
    assert.match(await page.textContent('#ft-status'), /Fine-tuning failed: .*bad\.jsonl.*line 2/);
    s.assertNoErrors('the Fine-tune panel');
  } finally {
    await s.close();
  }
});
