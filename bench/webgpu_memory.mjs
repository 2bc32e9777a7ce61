#!/usr/bin/env node
// The GPU memory of the WebGPU backend's training programs for GPT-2 shapes, counted without a GPU:
// the persistent tensors (weights; AdamW moments of what trains) and the buffers the other tensors
// share by liveness (web/webgpu/src/memory.ts), against a buffer per tensor. One JSON line per model,
// variant and batch:
//   {"kind":"webgpu_memory","model","variant":"full|lora","batch","seq","persistent_gib","shared_gib",
//    "live_peak_gib","unshared_gib","total_gib","total_unshared_gib"}
// total_gib = persistent_gib + shared_gib (what the executor allocates, less the vocabulary chunk and
// matrix-product scratch buffers, a few MiB); live_peak_gib: the most bytes live at one point of the
// program, the least any layout needs. LoRA: rank 16, alpha 32 on qkv, o, fc_in, fc_out.
//   node bench/webgpu_memory.mjs [--ptl build/ptl] [--models gpt2,gpt2-medium] [--batches 8,4] [--work DIR]
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { benchArgs } from './args.mjs';
import { GPT2, gpt2Checkpoint } from './gpt2_shapes.mjs';

const args = benchArgs(import.meta.url, ['ptl', 'models', 'batches', 'work']);
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const DIST = path.join(ROOT, 'web', 'webgpu', 'dist');
if (!existsSync(path.join(DIST, 'index.js'))) {
  console.error('build the WebGPU package first: npm --prefix web/webgpu run build');
  process.exit(2);
}
const { planMemory } = await import(path.join(DIST, 'index.js'));
const ptl = String(args.ptl ?? path.join(ROOT, 'build', 'ptl'));
const work = String(args.work ?? mkdtempSync(path.join(os.tmpdir(), 'ptl-memory-')));
const GiB = 2 ** 30;
const gib = (bytes) => +(bytes / GiB).toFixed(2);
const numel = (t) => t.shape.reduce((a, b) => a * b, 1);

for (const name of String(args.models ?? 'gpt2,gpt2-medium').split(',')) {
  const m = GPT2[name];
  if (!m) {
    console.error(`bench/webgpu_memory.mjs: unknown model '${name}' (${Object.keys(GPT2).join(', ')})`);
    process.exit(2);
  }
  const ckpt = gpt2Checkpoint(ptl, work, name, m);
  for (const batch of String(args.batches ?? '8,4')
    .split(',')
    .map(Number))
    for (const variant of ['full', 'lora']) {
      const pargs = ['program', ckpt, '--program', 'train', '--batch', String(batch)];
      if (variant === 'lora')
        pargs.push('--lora-rank', '16', '--lora-alpha', '32', '--lora-targets', 'qkv,o,fc_in,fc_out');
      const program = JSON.parse(execFileSync(ptl, pargs, { encoding: 'utf8', maxBuffer: 1 << 28 }));
      const persistent = program.tensors
        .filter((t) => ['parameter', 'optim_state', 'state'].includes(t.kind))
        .reduce((a, t) => a + numel(t) * 4, 0);
      const plan = planMemory(program);
      console.log(
        JSON.stringify({
          kind: 'webgpu_memory',
          model: name,
          variant,
          batch,
          seq: m.ctx,
          persistent_gib: gib(persistent),
          shared_gib: gib(plan.bytes),
          live_peak_gib: gib(plan.livePeak),
          unshared_gib: gib(plan.unshared),
          total_gib: gib(persistent + plan.bytes),
          total_unshared_gib: gib(persistent + plan.unshared),
        }),
      );
    }
}
