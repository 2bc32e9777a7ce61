// The tokenizer in WebAssembly (wasm/api.cpp, ptl_tokenizer_*) against native `ptl tokenizer`:
// GPT-2's ids, and a tokenizer trained in WebAssembly byte for byte the native one.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';

import { GPT2_DIR, wasmTokenizer } from '../tokenizer/helpers.mjs';
import { BUILD_DIR, ROOT, VARIANT, dataFile, ptl } from './helpers.mjs';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ptl-wasm-tokenizer-'));
const tok = await wasmTokenizer(path.join(BUILD_DIR, VARIANT));
after(() => tok.terminate());

const nativeIds = (tokenizer, file) =>
  JSON.parse(ptl(['tokenizer', 'encode', '--tokenizer', tokenizer, '--data', file, '--json'])).ids;

test('GPT-2 in WebAssembly gives the native ids', () => {
  const json = path.join(tmp, 'gpt2.json');
  ptl(['tokenizer', 'convert', '--tokenizer', GPT2_DIR, '--out', json]);
  const h = tok.load(fs.readFileSync(json, 'utf8'));
  for (const file of [dataFile(), path.join(ROOT, 'tests', 'tokenizer', 'edge_cases.txt')]) {
    const [ids] = tok.encode(h, fs.readFileSync(file));
    assert.deepEqual(Array.from(ids), nativeIds(json, file), path.basename(file));
  }
  tok.free(h);
});

test('a tokenizer trained in WebAssembly is the native one, byte for byte', () => {
  const out = path.join(tmp, 'native.json');
  ptl(['tokenizer', 'train', '--data', dataFile(), '--vocab-size', '1024', '--out', out]);
  const h = tok.train(fs.readFileSync(dataFile()), 1024);
  assert.equal(tok.json(h), fs.readFileSync(out, 'utf8'));
  tok.free(h);
});

test('a malformed tokenizer.json is refused with a message naming it', () => {
  assert.throws(() => tok.load('{"model": 1}', 'bad.json'), /^Error: bad\.json: not a tokenizer\.json/);
  assert.throws(() => tok.train(Buffer.from('abc'), 256), /vocabulary size 256 is outside 257\.\.65536/);
});
