// Shared by the WebAssembly tests (node --test tests/wasm/). Paths, the native `ptl` runs the
// tests compare against, and loading the engine through the TypeScript API (web/engine/dist).
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const BUILD_DIR = process.env.PTL_WASM_BUILD_DIR ?? path.join(ROOT, 'build-wasm');
export const VARIANT = process.env.PTL_WASM_VARIANT ?? 'simd-threads';
export const NATIVE_PTL = process.env.PTL_NATIVE_BIN ?? path.join(BUILD_DIR, 'native', 'ptl');
export const FIXTURES = process.env.PTL_WASM_FIXTURES ?? path.join(BUILD_DIR, 'test-fixtures');

const api = await import(path.join(ROOT, 'web', 'engine', 'dist', 'index.js'));
export const {
  Engine,
  EngineError,
  loadModule,
  LoadedModule,
  selectBuild,
  detectCapabilities,
  estimateStateBytes,
  serveEngine,
  EngineClient,
} = api;

export function dataFile() {
  const candidates = [];
  if (process.env.PTL_DATA_DIR) candidates.push(path.join(process.env.PTL_DATA_DIR, 'tinyshakespeare.txt'));
  candidates.push(path.join(ROOT, '..', 'shared', 'data', 'tinyshakespeare.txt'));
  for (const c of candidates) if (fs.existsSync(c)) return c;
  throw new Error(`TinyShakespeare not found (tried ${candidates.join(', ')}): set PTL_DATA_DIR`);
}

export function ptl(args, options = {}) {
  return execFileSync(NATIVE_PTL, args, {
    encoding: options.encoding ?? 'utf8',
    maxBuffer: 1 << 28,
    stdio: ['ignore', 'pipe', 'pipe'],
    ...options,
  });
}

// A native training run, once per fixture folder (shared by the test files; made atomically).
export function nativeRun(name, args) {
  const dir = path.join(FIXTURES, name);
  if (fs.existsSync(path.join(dir, 'model.tinygpt'))) return dir;
  fs.mkdirSync(FIXTURES, { recursive: true });
  const tmp = fs.mkdtempSync(path.join(FIXTURES, `${name}.tmp-`));
  ptl(['train', ...args, '--out', tmp]);
  try {
    fs.renameSync(tmp, dir);
  } catch (e) {
    if (!fs.existsSync(path.join(dir, 'model.tinygpt'))) throw e; // another test file won the race
    fs.rmSync(tmp, { recursive: true, force: true });
  }
  return dir;
}

// The reference run of the parity test: Small, 50 steps, seed 1337, batch 16, the preset's lr, cosine.
export const SMALL_STEPS = 50;
export function nativeSmallRun() {
  return nativeRun('small-50', [
    '--preset',
    'small',
    '--steps',
    String(SMALL_STEPS),
    '--data',
    dataFile(),
    '--eval-every',
    '1000',
    '--sample-every',
    '0',
  ]);
}

export function readMetrics(dir) {
  return fs
    .readFileSync(path.join(dir, 'metrics.jsonl'), 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l));
}

export function tmpDir(prefix = 'ptl-wasm-') {
  return fs.mkdtempSync(path.join(os.tmpdir(), prefix));
}

// One module per test file (the threaded build keeps workers alive: terminate() in after()).
export async function load(variant = VARIANT, options = {}) {
  return loadModule({ buildDir: BUILD_DIR, variant, ...options });
}

export { encodeSafetensors, f32, parseSafetensors } from './safetensors.mjs';

export function maxAbsDiff(a, b) {
  if (a.length !== b.length) throw new Error(`lengths differ: ${a.length} vs ${b.length}`);
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i] - b[i]));
  return m;
}

// The native one-program runner sits in the tests folder of a native build with tests (CI's
// build/); PTL_PROGRAM_RUN names it explicitly. needsNative: the options of a test that needs it.
export const PROGRAM_RUN =
  process.env.PTL_PROGRAM_RUN ?? path.join(path.dirname(NATIVE_PTL), 'tests', 'ptl_program_run');
export const needsNative = fs.existsSync(PROGRAM_RUN)
  ? {}
  : { skip: `no ${PROGRAM_RUN} (build the native tests, or set PTL_PROGRAM_RUN)` };

// `ptl_program_run kernel`: the program run once natively on the inputs (safetensors bytes);
// returns every tensor after the run (safetensors bytes). Files go to `dir` under `name`.
export function nativeProgramRun(dir, programJson, inputs, name) {
  const prog = path.join(dir, `${name}.json`),
    inp = path.join(dir, `${name}.in.safetensors`),
    out = path.join(dir, `${name}.out.safetensors`);
  fs.writeFileSync(prog, typeof programJson === 'string' ? programJson : JSON.stringify(programJson));
  fs.writeFileSync(inp, inputs);
  execFileSync(PROGRAM_RUN, ['kernel', '--program', prog, '--in', inp, '--out', out], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  return fs.readFileSync(out);
}

export function relDiff(a, b) {
  return Math.abs(a - b) / Math.max(Math.abs(b), 1e-30);
}

// A Tiny model over a BPE tokenizer of `vocab` tokens trained on TinyShakespeare, trained `steps`
// steps natively (both made once per fixture folder); returns the run's folder.
export function nativeBpeRun(vocab, steps) {
  fs.mkdirSync(FIXTURES, { recursive: true });
  const tok = path.join(FIXTURES, `bpe-${vocab}.json`);
  if (!fs.existsSync(tok))
    ptl(['tokenizer', 'train', '--data', dataFile(), '--vocab-size', String(vocab), '--out', tok]);
  const args = ['--preset', 'tiny', '--tokenizer', tok, '--data', dataFile(), '--steps', String(steps)];
  return nativeRun(`tiny-bpe-${vocab}`, [...args, '--eval-every', '1000', '--sample-every', '0']);
}
