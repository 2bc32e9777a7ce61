// The /kernels page's worker: the project's parity checks, run on the visitor's machine.
// - WebGPU: every WGSL kernel against its C++ twin. The twin is the WebAssembly engine running
//   the same one-op program (runProgram), on the same random inputs (web/webgpu/src/checks.ts,
//   the cases the Node tests run too).
// - WebAssembly: 20 training steps of Tiny against the losses native `ptl` printed when this
//   site was built, and a greedy continuation against native's bytes.
import { Engine, loadModule } from '@posttrainllm/engine';
import { type KernelCase, WebGPUBackend, describeResult, runKernelChecks, summariseChecks } from '@posttrainllm/webgpu';
import native from '../generated/native-tiny.json';
import { kernelSource } from './kernels.js';

const scope = self as unknown as DedicatedWorkerGlobalScope;
const base = new URL(import.meta.env.BASE_URL, scope.location.href);
const post = (m: unknown) => scope.postMessage(m);

async function wasmChecks(module: Awaited<ReturnType<typeof loadModule>>): Promise<void> {
  if (!native) {
    post({
      kind: 'wasm',
      name: 'native reference',
      passed: false,
      detail: 'this site was built without the native reference (no corpus at build time)',
    });
    return;
  }
  const r = await fetch(new URL('data/tinyshakespeare.txt', base));
  if (!r.ok) {
    post({ kind: 'wasm', name: 'corpus', passed: false, detail: `could not fetch TinyShakespeare: HTTP ${r.status}` });
    return;
  }
  const text = new Uint8Array(await r.arrayBuffer());
  const e = await Engine.create({ preset: native.preset, train: { steps: native.steps, seed: native.seed } }, module);
  try {
    await e.setCorpus(text);
    const t0 = performance.now();
    const metrics = await e.train(native.steps);
    let worst = 0;
    metrics.forEach(
      (m, i) => (worst = Math.max(worst, Math.abs(m.loss - native.losses[i]!) / Math.abs(native.losses[i]!))),
    );
    post({
      kind: 'wasm',
      name: `Tiny, ${native.steps} training steps against native ptl`,
      passed: worst <= 1e-5,
      detail: `worst relative loss difference ${worst.toExponential(2)} (limit 1e-5); ${((performance.now() - t0) / native.steps).toFixed(1)} ms/step`,
    });
    const g = await e.generate(native.prompt, { maxTokens: 64, temperature: 0 });
    const hex = [...g.tokens].map((b) => b.toString(16).padStart(2, '0')).join('');
    post({
      kind: 'wasm',
      name: 'greedy generation against native ptl',
      passed: hex === native.greedy_hex,
      detail: hex === native.greedy_hex ? '64 bytes identical' : `differs: got ${JSON.stringify(g.text.slice(0, 40))}…`,
    });
  } finally {
    e.dispose();
  }
}

async function gpuChecks(module: Awaited<ReturnType<typeof loadModule>>, quick: boolean): Promise<void> {
  const gpu = (scope.navigator as Navigator & { gpu?: GPU }).gpu;
  const adapter = gpu ? await gpu.requestAdapter() : null;
  if (!adapter) {
    post({
      kind: 'gpu-none',
      detail: gpu ? 'this browser offers WebGPU but found no adapter' : 'this browser has no WebGPU',
    });
    return;
  }
  const device = await adapter.requestDevice({
    requiredLimits: WebGPUBackend.requiredLimits(adapter),
    requiredFeatures: WebGPUBackend.requiredFeatures(adapter),
  });
  const a = adapter.info;
  post({
    kind: 'gpu-adapter',
    detail: [a.vendor, a.architecture, a.description].filter((x) => x).join(' ') || 'unnamed adapter',
  });
  const backend = new WebGPUBackend(device, kernelSource());
  // The kernels the site runs; forced benchmark variants stay in the Node suite (checks.ts).
  // `quick`: each op's first case only, so every op's kernel is still compiled by this browser and
  // checked once (a software adapter takes minutes over the whole set).
  const seen = new Set<string>();
  const keep = (c: KernelCase) => {
    if (c.variant) return false;
    if (!quick) return true;
    if (seen.has(c.op.op)) return false;
    seen.add(c.op.op);
    return true;
  };
  const results = await runKernelChecks(
    backend,
    (program, inputs) => module.runProgram(program, inputs),
    (r) => post({ kind: 'kernel', result: r, line: describeResult(r) }),
    { filter: keep },
  );
  post({ kind: 'gpu-summary', summary: summariseChecks(results) });
  backend.destroy();
  device.destroy();
}

scope.addEventListener('message', async (ev: MessageEvent<{ quick: boolean }>) => {
  try {
    const module = await loadModule({ variant: 'simd', buildDir: new URL('wasm/', base).href, poolSize: 1 });
    post({ kind: 'engine', detail: `WebAssembly engine ${module.build.version} (${module.build.variant})` });
    await wasmChecks(module);
    await gpuChecks(module, ev.data.quick);
  } catch (e) {
    post({ kind: 'error', detail: e instanceof Error ? e.message : String(e) });
  }
  post({ kind: 'done' });
});
