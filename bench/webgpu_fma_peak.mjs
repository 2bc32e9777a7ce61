#!/usr/bin/env node
// The fp32 FMA ceiling of this WebGPU path (Dawn -> Vulkan -> driver): a compute shader whose
// threads run 16 independent vec4 fma chains (64 fp32 FMAs per iteration, no memory traffic),
// on enough workgroups to fill the GPU. Prints one JSON line {"kind":"fma_peak","gflops",...}.
//   node bench/webgpu_fma_peak.mjs [--iters 4096] [--workgroups 4224] [--dawn 'enable-dawn-features=...']
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { benchArgs } from './args.mjs';

const args = benchArgs(import.meta.url, ['iters', 'workgroups', 'dawn']);

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const DIST = path.join(ROOT, 'web', 'webgpu', 'dist');
if (!existsSync(path.join(DIST, 'node.js'))) {
  console.error('build the WebGPU package first: npm --prefix web ci && npm --prefix web/webgpu run build');
  process.exit(2);
}
const { createNodeBackend } = await import(path.join(DIST, 'node.js'));
const iters = Number(args.iters ?? 4096),
  wgs = Number(args.workgroups ?? 4224);
const gpu = await createNodeBackend(args.dawn ? String(args.dawn).split(';') : []);
const { device } = gpu;
const decl = Array.from({ length: 16 }, (_, i) => `var a${i} = vec4<f32>(f32(lid + ${i}u) * 1e-3);`).join('\n  ');
const body = Array.from({ length: 16 }, (_, i) => `a${i} = fma(a${i}, m, c);`).join(' ');
const sum = Array.from({ length: 16 }, (_, i) => `a${i}`).join(' + ');
const code = `
struct P { iters: u32, _a: u32, _b: u32, _c: u32 }
@group(0) @binding(0) var<uniform> U: P;
@group(0) @binding(1) var<storage, read_write> out: array<vec4<f32>>;
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  ${decl}
  let m = vec4<f32>(0.999999);
  let c = vec4<f32>(1e-7);
  for (var i = 0u; i < U.iters; i++) { ${body} }
  let s = ${sum};
  if (s.x == 12345.678) { out[gid.x] = s; }
}`;
const module = device.createShaderModule({ code });
const pipeline = await device.createComputePipelineAsync({ layout: 'auto', compute: { module, entryPoint: 'main' } });
const ubuf = device.createBuffer({ size: 16, usage: GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST });
device.queue.writeBuffer(ubuf, 0, new Uint32Array([iters, 0, 0, 0]));
const obuf = device.createBuffer({ size: wgs * 256 * 16, usage: GPUBufferUsage.STORAGE });
const bg = device.createBindGroup({
  layout: pipeline.getBindGroupLayout(0),
  entries: [
    { binding: 0, resource: { buffer: ubuf } },
    { binding: 1, resource: { buffer: obuf } },
  ],
});
async function run(n) {
  const enc = device.createCommandEncoder();
  const pass = enc.beginComputePass();
  pass.setPipeline(pipeline);
  pass.setBindGroup(0, bg);
  for (let i = 0; i < n; i++) pass.dispatchWorkgroups(wgs);
  pass.end();
  const t0 = performance.now();
  device.queue.submit([enc.finish()]);
  await device.queue.onSubmittedWorkDone();
  return (performance.now() - t0) / n;
}
const t0 = performance.now();
while (performance.now() - t0 < 500) await run(4);
const res = [];
for (let r = 0; r < 3; r++) res.push(await run(20));
const flops = 2 * 64 * iters * wgs * 256;
const best = Math.min(...res);
console.log(
  JSON.stringify({
    kind: 'fma_peak',
    adapter: gpu.description,
    dawn: args.dawn ?? null,
    iters,
    workgroups: wgs,
    ms: +best.toFixed(3),
    gflops: Math.round(flops / (best * 1e6)),
    gflops_all: res.map((t) => Math.round(flops / (t * 1e6))),
  }),
);
device.destroy();
process.exit(0);
