// Greedy generation (temperature 0) in wasm equals native `ptl sample`'s continuation.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';

import { Engine, load, nativeSmallRun, ptl, VARIANT } from './helpers.mjs';

let module, engine, ckpt;
before(async () => {
  module = await load();
  ckpt = path.join(nativeSmallRun(), 'model.tinygpt');
  engine = await Engine.fromCheckpoint(new Uint8Array(fs.readFileSync(ckpt)), module);
});
after(() => {
  engine?.dispose();
  module?.terminate();
});

function nativeSample(prompt, maxTokens, extra = []) {
  // --raw: the bytes as generated; stdout is the prompt, the continuation and a newline.
  const out = ptl(
    ['sample', ckpt, '--prompt', prompt, '--temperature', '0', '--max-tokens', String(maxTokens), '--raw', ...extra],
    { encoding: 'buffer' },
  );
  const p = Buffer.from(prompt, 'utf8');
  assert.ok(out.subarray(0, p.length).equals(p), 'native output starts with the prompt');
  assert.equal(out[out.length - 1], 10);
  return out.subarray(p.length, out.length - 1);
}

for (const prompt of [
  'ROMEO:',
  'First Citizen:\nWe are accounted poor citizens, the patricians good. What authority surfeits on',
]) {
  test(`${VARIANT}: greedy generation equals native ptl sample (prompt of ${prompt.length} bytes, 100 tokens, past the context)`, async () => {
    const expected = nativeSample(prompt, 100);
    assert.equal(expected.length, 100);
    const streamed = [];
    const cb = await engine.generate(prompt, { maxTokens: 100, temperature: 0, onToken: (t) => void streamed.push(t) });
    assert.deepEqual(Buffer.from(cb.tokens), expected, 'callback mode (Trainer::generate)');
    assert.deepEqual(streamed, [...expected], 'the streamed tokens');
    const polled = [];
    const pr = await engine.generate(prompt, {
      maxTokens: 100,
      temperature: 0,
      mode: 'polling',
      onToken: (t) => void polled.push(t),
    });
    assert.deepEqual(Buffer.from(pr.tokens), expected, 'polling mode (ptl_generate_start / next)');
    assert.deepEqual(polled, [...expected]);
    console.log(
      `# greedy continuation of ${JSON.stringify(prompt.slice(0, 12))}: ${JSON.stringify(cb.text.slice(0, 40))}... equal to native (100 tokens)`,
    );
  });
}

test(`${VARIANT}: sampled generation with a seed equals native (temperature 0.8, top-k 40)`, async () => {
  const out = ptl(
    [
      'sample',
      ckpt,
      '--prompt',
      'KING:',
      '--temperature',
      '0.8',
      '--top-k',
      '40',
      '--seed',
      '5',
      '--max-tokens',
      '60',
      '--raw',
    ],
    { encoding: 'buffer' },
  );
  const expected = out.subarray(5, out.length - 1);
  const r = await engine.generate('KING:', { maxTokens: 60, temperature: 0.8, topK: 40, seed: 5 });
  assert.deepEqual(Buffer.from(r.tokens), expected);
  const p = await engine.generate('KING:', { maxTokens: 60, temperature: 0.8, topK: 40, seed: 5, mode: 'polling' });
  assert.deepEqual(Buffer.from(p.tokens), expected);
});

test(`${VARIANT}: onToken returning false stops generation early`, async () => {
  let n = 0;
  const r = await engine.generate('ROMEO:', { maxTokens: 50, temperature: 0, onToken: () => ++n < 7 });
  assert.equal(r.tokens.length, 7);
  n = 0;
  const p = await engine.generate('ROMEO:', { maxTokens: 50, temperature: 0, mode: 'polling', onToken: () => ++n < 7 });
  assert.equal(p.tokens.length, 7);
});
