// A checkpoint over a BPE tokenizer in WebAssembly: it loads with its tokenizer, encodes and
// decodes as native `ptl tokenizer` does, samples what native `ptl sample` samples, and evaluates
// in bits per byte. And a model made in WebAssembly over a tokenizer trained there (what the
// playground does): native `ptl train --tokenizer`'s losses, and a checkpoint native ptl reads.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';

import {
  dataFile,
  Engine,
  FIXTURES,
  load,
  nativeRun,
  nativeBpeRun,
  ptl,
  readMetrics,
  relDiff,
  VARIANT,
} from './helpers.mjs';

let module, engine, ckpt;
before(async () => {
  module = await load();
  // A 512-token tokenizer of TinyShakespeare and a Tiny model over it, trained 30 steps natively.
  const dir = nativeBpeRun(512, 30);
  ckpt = path.join(dir, 'model.tinygpt');
  engine = await Engine.fromCheckpoint(new Uint8Array(fs.readFileSync(ckpt)), module);
});
after(() => {
  engine?.dispose();
  module?.terminate();
});

test(`${VARIANT}: a BPE checkpoint loads with its tokenizer`, async () => {
  const info = await engine.info();
  assert.equal(info.model.vocab_size, 512);
  assert.equal(info.tokenizer.type, 'bpe');
  const native = JSON.parse(ptl(['info', ckpt, '--json']));
  assert.equal(info.tokenizer.sha256, native.tokenizer.sha256);
  const t = engine.tokenizerInfo();
  assert.equal(t.vocab_size, 512);
  assert.deepEqual(t.specials, [{ text: '<|endoftext|>', id: 511 }]);
  // The tokenizer.json it records is the one native ptl reads out of the checkpoint.
  const json = engine.tokenizerJson();
  const out = path.join(FIXTURES, 'bpe-512-from-wasm.json');
  fs.writeFileSync(out, json);
  const text = 'ROMEO:\nWhat say you, my lord? \u00e9t\u00e9 \u{1F600}';
  const input = path.join(FIXTURES, 'bpe-text.txt');
  fs.writeFileSync(input, text);
  const nativeIds = JSON.parse(ptl(['tokenizer', 'encode', '--tokenizer', ckpt, '--data', input, '--json'])).ids;
  assert.deepEqual([...engine.encode(text)], nativeIds);
  assert.deepEqual(
    JSON.parse(ptl(['tokenizer', 'encode', '--tokenizer', out, '--data', input, '--json'])).ids,
    nativeIds,
  );
  assert.equal(engine.decodeText(nativeIds), text);
  assert.ok(nativeIds.length < Buffer.byteLength(text), 'merged tokens');
});

test(`${VARIANT}: greedy sampling of a BPE checkpoint equals native ptl sample, decoded`, async () => {
  const prompt = 'ROMEO:';
  const out = ptl(['sample', ckpt, '--prompt', prompt, '--temperature', '0', '--max-tokens', '40', '--raw'], {
    encoding: 'buffer',
  });
  const expected = out.subarray(Buffer.byteLength(prompt), out.length - 1);
  const streamed = [];
  let text = '';
  const r = await engine.generate(prompt, {
    maxTokens: 40,
    temperature: 0,
    onToken: (t) => void streamed.push(t),
    onText: (s) => void (text += s),
  });
  assert.equal(r.ids.length, 40);
  assert.deepEqual([...r.ids], streamed);
  assert.deepEqual(Buffer.from(r.tokens), expected, 'the decoded bytes are native ptl sample output');
  assert.equal(r.text, expected.toString('utf8'));
  assert.equal(text, r.text, 'onText streams the same text');
  const p = await engine.generate(prompt, { maxTokens: 40, temperature: 0, mode: 'polling' });
  assert.deepEqual(Buffer.from(p.tokens), expected, 'polling mode');
  console.log(`# BPE greedy continuation: ${JSON.stringify(r.text.slice(0, 60))}`);
});

test(`${VARIANT}: a BPE model evaluates in bits per byte, as native ptl eval`, async () => {
  const text = fs.readFileSync(dataFile()).subarray(0, 4000);
  const input = path.join(FIXTURES, 'bpe-eval.txt');
  fs.writeFileSync(input, text);
  const native = JSON.parse(ptl(['eval', ckpt, '--data', input, '--json']));
  const v = await engine.evaluate(text);
  assert.equal(v.tokens, native.tokens);
  assert.equal(v.bytes, native.bytes);
  assert.ok(Math.abs(v.loss - native.loss) < 1e-5, `${v.loss} vs ${native.loss}`);
  assert.ok(Math.abs(v.bits_per_byte - (v.loss * v.tokens) / (v.bytes * Math.LN2)) < 1e-9);
  assert.ok(v.bytes > v.tokens);
});

test(`${VARIANT}: a model over a tokenizer trained in WebAssembly trains as native ptl train --tokenizer`, async () => {
  const text = fs.readFileSync(dataFile()).subarray(0, 200_000);
  const input = path.join(FIXTURES, 'bpe-200k.txt');
  fs.writeFileSync(input, text);
  const tok = module.trainTokenizer(text, 300);
  assert.equal(tok.vocab_size, 300);
  assert.ok(tok.merges >= 300 - 257, `${tok.merges} merges make the 43 new tokens`);
  assert.deepEqual(tok.specials, [{ text: '<|endoftext|>', id: 299 }]);
  const tokFile = path.join(FIXTURES, 'bpe-300-200k.json');
  ptl(['tokenizer', 'train', '--data', input, '--vocab-size', '300', '--out', tokFile]);
  assert.equal(tok.json, fs.readFileSync(tokFile, 'utf8'), 'the native tokenizer, byte for byte');

  const steps = 5;
  const native = readMetrics(
    nativeRun('tiny-bpe-300-200k', [
      ...['--preset', 'tiny', '--tokenizer', tokFile, '--data', input, '--steps', String(steps)],
      ...['--batch', '4', '--seed', '7', '--eval-every', '1000', '--sample-every', '0'],
    ]),
  );
  const e = await Engine.create(
    { preset: 'tiny', train: { batch: 4, seed: 7, steps, schedule: 'cosine' }, tokenizer: tok.json },
    module,
  );
  try {
    const info = await e.info();
    assert.equal(info.model.vocab_size, 300);
    assert.equal(info.tokenizer.type, 'bpe');
    assert.equal(e.tokenizerJson(), tok.json);
    await e.setCorpus(text);
    const corpus = (await e.info()).corpus;
    assert.equal(corpus.train_tokens, e.encode(text.subarray(0, corpus.train_bytes)).length);
    assert.ok(corpus.train_tokens < corpus.train_bytes * 0.8, 'merged tokens: fewer tokens than bytes');
    const metrics = await e.train(steps);
    assert.ok(Math.abs(metrics[0].loss - Math.log(300)) < 0.3, `first loss ${metrics[0].loss} near ln 300`);
    for (let i = 0; i < steps; i++)
      assert.ok(relDiff(metrics[i].loss, native[i].train_loss) < 1e-5, `step ${i + 1}: ${metrics[i].loss} vs native`);
    // The checkpoint is a BPE checkpoint native ptl reads: its tokenizer is the one trained here.
    const file = path.join(FIXTURES, 'bpe-300-from-wasm.tinygpt');
    fs.writeFileSync(file, await e.exportCheckpoint());
    const nativeInfo = JSON.parse(ptl(['info', file, '--json']));
    assert.equal(nativeInfo.tokenizer.type, 'bpe');
    assert.equal(nativeInfo.tokenizer.vocab_size, 300);
    assert.equal(nativeInfo.tokenizer.sha256, info.tokenizer.sha256);
  } finally {
    e.dispose();
  }
  await assert.rejects(
    Engine.create({ preset: 'tiny', model: { vocab_size: 256 }, tokenizer: tok.json }, module),
    /model\.vocab_size 256 differs from the tokenizer's 300 tokens/,
  );
  await assert.rejects(
    Engine.create({ preset: 'tiny', tokenizer: 7 }, module),
    /'tokenizer' must be the text of a tokenizer\.json/,
  );
  await assert.rejects(Engine.create({ preset: 'tiny', tokenizer: '{"model": 1}' }, module), /not a tokenizer\.json/);
  assert.throws(() => module.trainTokenizer('abc', 256), /vocabulary size 256 is outside 257\.\.65536/);
});
