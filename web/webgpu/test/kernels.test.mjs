// Every WGSL kernel against its C++ twin: the cases live in src/checks.ts (shared with the
// site's /kernels page, which runs them against the WebAssembly engine); here the reference is
// the native CPU executor, `ptl_program_run kernel`. Writes test-out/kernels.json (every case's
// max abs/rel error per output) for run-all.mjs's summary line.
import assert from 'node:assert/strict';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, test } from 'node:test';

import { describeResult, kernelCases, runKernelCase, summariseChecks } from '../dist/index.js';
import { OUT, backend, closeBackend, run, tool } from './helpers.mjs';

const dir = join(OUT, 'kernels');
mkdirSync(dir, { recursive: true });

// (programJson, inputs) -> outputs through files under test-out/kernels/, named after the program.
async function nativeReference(programJson, inputs) {
  const base = join(dir, JSON.parse(programJson).name.replace(/[^a-z0-9_]+/gi, '_'));
  writeFileSync(`${base}.json`, programJson);
  writeFileSync(`${base}.in.safetensors`, inputs);
  try {
    run(tool('ptl_program_run'), [
      'kernel',
      '--program',
      `${base}.json`,
      '--in',
      `${base}.in.safetensors`,
      '--out',
      `${base}.out.safetensors`,
    ]);
  } catch (e) {
    throw new Error(`ptl_program_run kernel failed: ${e.stderr || e.message}`, { cause: e });
  }
  return new Uint8Array(readFileSync(`${base}.out.safetensors`));
}

// The generated matmul's benchmark candidates that 'auto' never picks (checks.ts: `variant`): each
// takes SwiftShader 5 to 25 s to compile, 90 s in all, for code the product never runs. They run
// with PTL_WEBGPU_VARIANTS=1, as bench/gpu_run.sh's kernel tests do before benchmarking them.
const variants = process.env.PTL_WEBGPU_VARIANTS === '1';
const results = [];
for (const c of kernelCases()) {
  if (c.variant && !variants) {
    test(c.name, { skip: 'a benchmark variant auto never picks (PTL_WEBGPU_VARIANTS=1 runs it)' }, () => {});
    continue;
  }
  test(c.name, async (t) => {
    const { backend: be } = await backend();
    const r = await runKernelCase(be, nativeReference, c);
    results.push(r);
    console.log(describeResult(r));
    if (r.skipped) return t.skip(r.skipped);
    assert.ok(r.passed, `${c.name}: ${r.error ?? ''} ${JSON.stringify(r.outputs)}`);
  });
}

after(() => {
  writeFileSync(join(OUT, 'kernels.json'), JSON.stringify({ ...summariseChecks(results), results }, null, 1));
  closeBackend();
});
