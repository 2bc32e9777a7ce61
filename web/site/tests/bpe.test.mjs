// The playground over a BPE tokenizer in headless Chromium: the corpus panel trains a tokenizer
// on the text (the one native `ptl tokenizer train` makes of it), a Tiny run trains over its
// tokens, sampling and inspection show the tokens with their ids (native ptl's for the same
// text), and the downloaded checkpoint is a BPE checkpoint that opens and resumes; on WebGPU the
// run trains, samples and inspects over the same tokens.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';

import { corpusPath, losses, OUT, openSite, ptl, shootBoth, waitIdleAt, waitReady } from './helpers.mjs';

const VOCAB = 300;

test('BPE: a tokenizer trained on an uploaded text, a Tiny run over its tokens, tokens shown, a BPE checkpoint', async () => {
  const text = fs.readFileSync(corpusPath()).subarray(0, 100_000);
  // The tokenizer learns from the training part only: the first 90% of the text.
  const trainFile = path.join(OUT, 'bpe-small-train.txt');
  fs.writeFileSync(trainFile, text.subarray(0, 90_000));
  const s = await openSite();
  const { page } = s;
  try {
    await waitReady(page);
    await page.check('input[name="corpus"][value="upload"]');
    await page.setInputFiles('#corpus-file', { name: 'small.txt', mimeType: 'text/plain', buffer: text });
    await page.waitForFunction(() => document.body.dataset.corpus === 'small.txt');

    // Choosing BPE trains the tokenizer in the worker; the panel says what it made.
    await page.check('input[name="tokenizer"][value="bpe"]');
    assert.equal(await page.inputValue('#bpe-vocab'), '512', 'the default vocabulary');
    await page.fill('#bpe-vocab', String(VOCAB));
    await page.dispatchEvent('#bpe-vocab', 'change');
    await page.waitForFunction((n) => document.body.dataset.bpe === String(n), VOCAB);
    assert.match(
      await page.textContent('#tokenizer-info'),
      /^A new run reads a BPE tokenizer of 300 tokens \(the 256 bytes, \d+ merges, <\|endoftext\|>\), trained on the training part of small\.txt in [\d.]+ s\.$/,
    );

    // A short run over its tokens: the first losses near ln 300, bits per byte from the engine.
    await page.evaluate(() => document.querySelectorAll('details').forEach((d) => (d.open = true)));
    await page.selectOption('#backend', 'wasm-threads');
    await page.selectOption('#preset', 'tiny');
    await page.fill('#steps', '10');
    await page.fill('#eval-every', '10');
    await page.fill('#sample-every', '10');
    await page.fill('#autosave-every', '0');
    await page.click('#start');
    await waitIdleAt(page, 10);
    assert.match(await page.textContent('#status'), /Finished 10 steps/);
    assert.equal(await page.evaluate(() => document.body.dataset.tokenizer), `bpe:${VOCAB}`);
    const about = await page.textContent('#model-tokenizer');
    const m = about.match(/reads a BPE tokenizer of 300 tokens: ([\d,]+) training tokens of ([\d,]+) bytes/);
    assert.ok(m, about);
    const [trainTokens, trainBytes] = [Number(m[1].replaceAll(',', '')), Number(m[2].replaceAll(',', ''))];
    assert.equal(trainBytes, 90_000, 'the first 90% of the text trains');
    assert.equal(await page.textContent('#chart-loss .u-title'), 'Loss (nats per token)');
    const ls = await losses(page);
    assert.equal(ls.length, 10);
    assert.ok(Math.abs(ls[0] - Math.log(VOCAB)) < 0.3, `the first loss ${ls[0]} is near ln ${VOCAB}`);
    const val = Number(await page.textContent('#s-val'));
    const bpb = Number(await page.textContent('#s-bpb'));
    // Bits per byte = nats per token x tokens / bytes / ln 2: a BPE token is more than a byte.
    assert.ok(bpb > 0 && bpb < val / Math.LN2, `bits per byte ${bpb} below the loss in bits per token`);

    // Another text: the current model reads it in its own tokens (the line counts them anew),
    // and the choice's tokenizer for a new run is trained on it.
    await page.check('input[name="corpus"][value="shakespeare"]');
    await page.waitForFunction(() => document.body.dataset.corpus === 'TinyShakespeare');
    await page.waitForFunction(() =>
      /training tokens of 1,003,855 bytes/.test(document.getElementById('model-tokenizer').textContent),
    );
    await page.waitForFunction(() =>
      /trained on the training part of TinyShakespeare/.test(document.getElementById('tokenizer-info').textContent),
    );

    // Sampling shows each token, its id in the title.
    await page.fill('#length', '20');
    await page.click('#generate');
    await page.waitForFunction(
      () =>
        document.body.dataset.state === 'ready' &&
        document.getElementById('gen-stats').textContent.includes('tokens/s'),
    );
    assert.match(await page.textContent('#gen-stats'), /^20 tokens \(\d+ bytes\) in /);
    const sampled = await page.$$eval('#gen-out .tok', (els) =>
      els.map((e) => ({ ids: e.dataset.ids.split(' ').map(Number), text: e.textContent, title: e.title })),
    );
    const ids = sampled.flatMap((t) => t.ids);
    assert.equal(ids.length, 20);
    assert.ok(
      ids.every((id) => Number.isInteger(id) && id >= 0 && id < VOCAB),
      `ids within the vocabulary: ${ids}`,
    );
    for (const t of sampled)
      assert.equal(t.title, t.ids.length === 1 ? `token ${t.ids[0]}` : `tokens ${t.ids.join(', ')}`);
    const out = await page.textContent('#gen-out');
    assert.equal(out, `ROMEO:${sampled.map((t) => t.text).join('')}`);

    // Watch the model think: the prompt in tokens, one label per token on the maps.
    await page.click('#inspect');
    await page.waitForFunction(() => !document.getElementById('inspect-out').hidden);
    const prompt = await page.inputValue('#inspect-prompt');
    const seen = await page.$$eval('#inspect-tokens .tok', (els) => els.map((e) => Number(e.dataset.ids)));
    assert.equal(await page.textContent('#inspect-tokens'), prompt);
    assert.equal(await page.locator('#top10 .bar').count(), 10);
    assert.equal(await page.locator('#attention canvas').count(), 6);
    assert.equal(await page.locator('#attention .attn .cols').first().locator('span').count(), seen.length);
    await shootBoth(page, 'playground-bpe');
    // A character the tokenizer never saw is two byte tokens: one span holding both ids.
    await page.fill('#inspect-prompt', 'café');
    await page.click('#inspect');
    await page.waitForFunction(() => document.getElementById('inspect-tokens').textContent === 'café');
    const accented = await page.$$eval('#inspect-tokens .tok', (els) => els.map((e) => [e.textContent, e.dataset.ids]));
    assert.deepEqual(
      accented.at(-1),
      ['é', '195 169'],
      `the last span: é, bytes 0xc3 0xa9 (${JSON.stringify(accented)})`,
    );
    await page.fill('#inspect-prompt', prompt);

    // The download is a BPE checkpoint: native ptl reads its tokenizer, the one native ptl trains
    // on the same text, and gives the page's ids for the page's texts.
    const [download] = await Promise.all([page.waitForEvent('download'), page.click('#download')]);
    const file = path.join(OUT, 'downloaded-bpe.tinygpt');
    await download.saveAs(file);
    const info = JSON.parse(ptl(['info', file, '--json']));
    assert.equal(info.tokenizer.type, 'bpe');
    assert.equal(info.tokenizer.vocab_size, VOCAB);
    const nativeTok = path.join(OUT, 'bpe-small-native.json');
    ptl(['tokenizer', 'train', '--data', trainFile, '--vocab-size', String(VOCAB), '--out', nativeTok]);
    const sha = crypto.createHash('sha256').update(fs.readFileSync(nativeTok)).digest('hex');
    assert.equal(info.tokenizer.sha256, sha, "the page's tokenizer is native ptl's for the same text");
    const promptFile = path.join(OUT, 'bpe-prompt.txt');
    fs.writeFileSync(promptFile, prompt);
    const nativeIds = JSON.parse(ptl(['tokenizer', 'encode', '--tokenizer', file, '--data', promptFile, '--json'])).ids;
    assert.deepEqual(seen, nativeIds, 'the inspected tokens are native ptl ids of the prompt');
    const decoded = ptl(['tokenizer', 'decode', '--tokenizer', file], {
      input: ids.join(' '),
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    assert.equal(decoded, sampled.map((t) => t.text).join(''), 'the sampled ids decode natively to the text shown');
    const train = JSON.parse(ptl(['tokenizer', 'encode', '--tokenizer', file, '--data', trainFile, '--json']));
    assert.equal(trainTokens, train.tokens, 'the training tokens: native ptl encodes the training part to as many');

    // Opened again, it reads the same tokens and resumes.
    await page.setInputFiles('#open-file', file);
    await page.waitForFunction(() => document.body.dataset.opened === 'downloaded-bpe.tinygpt');
    assert.match(await page.textContent('#model-tokenizer'), /^The current model reads a BPE tokenizer of 300 tokens/);
    await page.fill('#autosave-every', '10');
    await page.fill('#steps', '12');
    await page.click('#resume');
    await waitIdleAt(page, 12);
    assert.match(await page.textContent('#status'), /Finished 12 steps/);
    // Its autosave (at the run's end) comes back after a reload, over the same tokens.
    await page.reload();
    await waitReady(page);
    assert.equal(await page.evaluate(() => document.body.dataset.restored), '12');
    assert.equal(await page.evaluate(() => document.body.dataset.tokenizer), `bpe:${VOCAB}`);
    assert.match(await page.textContent('#model-tokenizer'), /^The current model reads a BPE tokenizer of 300 tokens/);
    s.assertNoErrors('the playground over BPE');
  } finally {
    await s.close();
  }
});

test('BPE on WebGPU (SwiftShader): the run trains over the tokens; sampling and inspection on the GPU agree with WebAssembly', async () => {
  const s = await openSite();
  const { page } = s;
  try {
    await waitReady(page);
    await page.check('input[name="corpus"][value="upload"]');
    const text = fs.readFileSync(corpusPath()).subarray(0, 100_000);
    await page.setInputFiles('#corpus-file', { name: 'small.txt', mimeType: 'text/plain', buffer: text });
    await page.waitForFunction(() => document.body.dataset.corpus === 'small.txt');
    await page.check('input[name="tokenizer"][value="bpe"]');
    await page.fill('#bpe-vocab', String(VOCAB));
    await page.dispatchEvent('#bpe-vocab', 'change');
    await page.waitForFunction((n) => document.body.dataset.bpe === String(n), VOCAB);
    await page.evaluate(() => document.querySelectorAll('details').forEach((d) => (d.open = true)));
    await page.selectOption('#backend', 'webgpu');
    await page.selectOption('#preset', 'tiny');
    await page.fill('#steps', '6');
    await page.fill('#eval-every', '6');
    await page.fill('#sample-every', '0');
    await page.fill('#autosave-every', '0');
    await page.click('#start');
    await waitIdleAt(page, 6);
    assert.match(await page.textContent('#status'), /Finished 6 steps on WebGPU/);
    const ls = await losses(page);
    assert.ok(Math.abs(ls[0] - Math.log(VOCAB)) < 0.3, `the first loss ${ls[0]} is near ln ${VOCAB}`);

    // Sampling on the GPU: the prompt in the model's tokens, the tokens decoded by its tokenizer.
    await page.fill('#length', '10');
    await page.click('#generate');
    await page.waitForFunction(
      () =>
        document.body.dataset.state === 'ready' &&
        document.getElementById('gen-stats').textContent.includes('tokens/s'),
    );
    assert.match(await page.textContent('#gen-stats'), /^10 tokens \(\d+ bytes\) in /);
    const ids = await page.$$eval('#gen-out .tok', (els) => els.flatMap((e) => e.dataset.ids.split(' ').map(Number)));
    assert.equal(ids.length, 10);
    assert.ok(ids.every((id) => id >= 0 && id < VOCAB));

    // Inspection on the GPU and then on WebAssembly (the GPU's weights come back): the same tokens and top 10.
    const inspected = async () => {
      await page.click('#inspect');
      await page.waitForFunction(
        () => !document.getElementById('inspect-out').hidden && document.body.dataset.state === 'ready',
      );
      return {
        tokens: await page.$$eval('#inspect-tokens .tok', (els) => els.map((e) => e.dataset.ids)),
        top: await page.$$eval('#top10 > span:nth-child(3n+1)', (els) => els.map((e) => e.textContent)),
      };
    };
    const gpu = await inspected();
    assert.equal(gpu.top.length, 10);
    await page.selectOption('#backend', 'wasm-threads');
    await page.waitForFunction(() => document.body.dataset.backend === 'wasm');
    assert.deepEqual(await inspected(), gpu, 'the prompt tokens and the top 10 agree between WebGPU and WebAssembly');
    s.assertNoErrors('the playground over BPE on WebGPU');
  } finally {
    await s.close();
  }
});
