// Shared by the Node tests: the WebGPU backend (Dawn via the npm package `webgpu`), the native
// reference tools (ptl, ptl_program_run) and small utilities.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

import { createNodeBackend } from '../dist/node.js';

export const HERE = dirname(fileURLToPath(import.meta.url));
export const PKG = resolve(HERE, '..');
export const REPO = resolve(PKG, '..', '..');
export const OUT = join(PKG, 'test-out');
mkdirSync(OUT, { recursive: true });

// The native build with ptl and ptl_program_run (run-all.mjs builds it when missing).
export function buildDir() {
  const candidates = [process.env.PTL_BUILD_DIR, join(REPO, 'build-gpu'), join(REPO, 'build')].filter(Boolean);
  for (const d of candidates) if (existsSync(join(d, 'tests', 'ptl_program_run')) && existsSync(join(d, 'ptl'))) return d;
  throw new Error(`no native build with ptl and tests/ptl_program_run in ${candidates.join(', ')}; run npm test (it builds one)`);
}
export const tool = (name) => (name === 'ptl' ? join(buildDir(), 'ptl') : join(buildDir(), 'tests', name));

export function run(cmd, args, opts = {}) {
  return execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], maxBuffer: 1 << 26, ...opts });
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

// Seeded PRNG (mulberry32) and normal draws (Box-Muller).
export function rng(seed) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return {
    uniform: next,
    int: (n) => Math.floor(next() * n),
    normal: () => {
      const u1 = Math.max(next(), 1e-12), u2 = next();
      return Math.sqrt(-2 * Math.log(u1)) * Math.cos(2 * Math.PI * u2);
    },
  };
}

// Max absolute and relative error of `got` against `want`, and whether every element satisfies
// |got - want| <= atol + rtol * |want|.
export function compare(got, want, atol, rtol) {
  let maxAbs = 0, maxRel = 0, ok = got.length === want.length, worst = -1;
  for (let i = 0; i < want.length; i++) {
    const d = Math.abs(got[i] - want[i]);
    if (!(d <= atol + rtol * Math.abs(want[i]))) { ok = false; if (worst < 0) worst = i; }
    if (!(d <= maxAbs)) maxAbs = d;
    const r = d / Math.max(Math.abs(want[i]), 1e-30);
    if (Math.abs(want[i]) > 1e-6 && !(r <= maxRel)) maxRel = r;
  }
  return { maxAbs, maxRel, ok, worst };
}

// Dawn's Node binding aborts at process exit while a device is alive: destroy it first.
export function closeBackend() {
  if (gpu) {
    gpu.backend.destroy();
    gpu.device.destroy();
    gpu = null;
  }
}
