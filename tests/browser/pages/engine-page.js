// The engine test page's helpers (window.ptlTest), used through page.evaluate by the tests.
// Served by tests/browser: /dist = web/engine/dist (the compiled TypeScript API), /bundle = the
// classic worker bundle of web/engine/src/browser-worker.ts, /wasm = the engine builds,
// /data = TinyShakespeare.
import { EngineClient, detectCapabilities, selectBuild, estimateStateBytes } from '/dist/index.js';

const workerErrors = [];

/** Starts the engine in a classic Web Worker and loads a build; returns the client and the build info. */
async function startEngine({ variant, poolSize, buildDir = '/wasm' }) {
  const worker = new Worker('/bundle/engine-worker.js');
  worker.addEventListener('error', (e) => {
    workerErrors.push(e.message || 'error in the engine worker');
    console.error('engine worker:', e.message);
  });
  const client = new EngineClient(worker);
  const build = await client.call('load', { variant, buildDir, ...(poolSize ? { poolSize } : {}) });
  return { client, worker, build };
}

async function fetchBytes(url) {
  const res = await fetch(url);
  if (!res.ok) throw new Error(`${url}: HTTP ${res.status}`);
  return new Uint8Array(await res.arrayBuffer());
}

/** Runs an EngineClient call and turns a rejection into a plain object (page.evaluate cannot carry Error subclasses). */
async function settle(promise) {
  try {
    return { ok: true, value: await promise };
  } catch (e) {
    return { ok: false, name: e?.name, message: e?.message, call: e?.call, isEngineError: e?.name === 'EngineError' };
  }
}

window.ptlTest = { startEngine, fetchBytes, settle, detectCapabilities, selectBuild, estimateStateBytes, workerErrors };
window.ptlTestReady = true;
