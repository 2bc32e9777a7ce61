// Shared by the Node tests: the WebGPU backend (Dawn via the npm package `webgpu`), the native
// reference tools (ptl, ptl_program_run) and small utilities.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

import { createNodeBackend } from '../dist/node.js';

export const HERE = dirname(fileURLToPath(import.meta.url));
export const PKG = resolve(HERE, '..');
export const REPO = resolve(PKG, '..', '..');
// PTL_WEBGPU_OUT moves the results (two runs at once in one checkout must not share a folder:
// run-all.mjs reads its summary back from kernels.json, train.json, ...).
export const OUT = process.env.PTL_WEBGPU_OUT ? resolve(process.env.PTL_WEBGPU_OUT) : join(PKG, 'test-out');
mkdirSync(OUT, { recursive: true });

// The native build with ptl and ptl_program_run (run-all.mjs builds it when missing).
export function buildDir() {
  const candidates = [process.env.PTL_BUILD_DIR, join(REPO, 'build-gpu'), join(REPO, 'build')].filter(Boolean);
  for (const d of candidates)
    if (existsSync(join(d, 'tests', 'ptl_program_run')) && existsSync(join(d, 'ptl'))) return d;
  throw new Error(
    `no native build with ptl and tests/ptl_program_run in ${candidates.join(', ')}; run npm test (it builds one)`,
  );
}
export const tool = (name) => (name === 'ptl' ? join(buildDir(), 'ptl') : join(buildDir(), 'tests', name));

export function run(cmd, args, opts = {}) {
  return execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], maxBuffer: 1 << 26, ...opts });
}

// A train program run on the CPU engine by ptl_program_run (tests/parity/program_run.cpp): from the
// weights `init` over the steps of `batches`, writing `out` (losses, gradient norms) and what `more`
// asks for (--save, --dump-step, --dump); returns `out` parsed.
export function cpuTrain({ init, program, batches, out, more = [] }) {
  run(tool('ptl_program_run'), [
    'train',
    '--init',
    init,
    '--program',
    program,
    '--batches',
    batches,
    '--out',
    out,
    ...more,
  ]);
  return JSON.parse(readFileSync(out, 'utf8'));
}

export function findCorpus() {
  const candidates = [
    process.env.PTL_DATA_DIR && join(process.env.PTL_DATA_DIR, 'tinyshakespeare.txt'),
    join(REPO, '..', 'shared', 'data', 'tinyshakespeare.txt'),
    join(REPO, 'shared', 'data', 'tinyshakespeare.txt'),
  ].filter(Boolean);
  for (const c of candidates) if (existsSync(c)) return c;
  throw new Error(`TinyShakespeare not found in ${candidates.join(', ')} (set PTL_DATA_DIR)`);
}

let gpu = null;
export async function backend() {
  gpu ??= await createNodeBackend();
  return gpu;
}

// The seeded generator and the tolerance check of the kernel cases (one home: src/checks.ts).
export { caseRng as rng, compare } from '../dist/index.js';

// Dawn's Node binding aborts at process exit while a device is alive: destroy it first.
export function closeBackend() {
  if (gpu) {
    gpu.backend.destroy();
    gpu.device.destroy();
    gpu = null;
  }
}
