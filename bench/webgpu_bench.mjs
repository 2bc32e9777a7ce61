#!/usr/bin/env node
// WebGPU backend speed: the matmul kernels (kernels/linear*.wgsl, the generated linear_tiled) in GFLOP/s at the presets'
// Linear shapes and at 4096^3, whole training steps (ms/step) per preset, and (--layernorm) LayerNorm forward and
// backward with each variant of the row reductions.
//
//   npm --prefix web ci && npm --prefix web/webgpu run build
//   node bench/webgpu_bench.mjs [--presets tiny,small,...|all] [--matmul preset|4096|none]
//                               [--layouts fwd,dx,dW] [--train 1|0] [--tag NAME] [--repeat N (4096^3: median of N)]
//                               [--steps 20] [--warmup 3] [--reps 20] [--warm-s 0.5] [--min-ms 300]
//                               [--ptl build-gpu/ptl] [--profile]
//                               [--tile 64|128] [--bk 8|16] [--nt 0|1] [--tiled V,V,... (auto|off|t64|nt|wide|128x128/8x8/k16[/db0][/map1][/sw1][/sg1][/pad0][/u0][/tr1])] [--split N] [--attn-rows 32|64] [--dawn 'enable-dawn-features=a,b;...']
//                               [--layernorm NxC,NxC,... (e.g. 8192x768,65536x1024; default none)] [--ln-variants subgroup,workgroup,auto]
//                               [--gpt2 gpt2,gpt2-medium,gpt2-test] [--gpt2-variants full,lora] [--gpt2-batch 8]
//                               [--lora-rank 16] [--lora-alpha 32] [--work DIR (default: the system's temp folder)]
//                               [--generate gpt2,gpt2-medium,gpt2-test] [--prompt-tokens 64] [--new-tokens 64]
//                               [--prefill-seq 32]
//
// Prints one JSON line per measurement and a summary line:
//   {"kind":"matmul","layout":"fwd|dx|dW","shape":"...","M","N","K","ms","gflops","max_rel_err","kernel"}
// Layouts (the three products of a Linear layer x[M,K], W[N,K], dy[M,N]; 2MNK flops each):
//   fwd y = x W^T (op linear), dx = dy W and dW = dy^T x (op linear_backward with one output).
//   {"kind":"train_step","preset","batch","ms_per_step","tokens_per_s","dispatches","loss_first","loss_last"}
//   {"bench":"layernorm","variant","N","C","ms_fwd","ms_bwd","ms_dx","GB_s","max_abs_err"}: one op `layernorm` (y, mean, rstd)
//     and one `layernorm_backward` (dx, dw, db; ms_dx: dx alone, the part whose reductions differ) on N rows of C,
//     with options.reductions = the variant (one backend each on the same device, measured in turn per shape; with
//     --repeat N the median of N); GB_s: the bytes both must move at least (x read, y written; dy and x read by dx
//     and again by dw/db, dx written: 7 N C floats) over ms_fwd + ms_bwd; max_abs_err: mean, rstd, dx of 4 rows
//     against float64.
//   {"kind":"gpt2_step","model","variant":"full|lora","batch","seq","ms_per_step","tokens_per_s","flops_per_step",
//    "tflops","params","trainable_params","buffer_gib","buffer_gib_unshared","dispatches","loss_first","loss_last"} (--gpt2): a training
//     step of a GPT-2 shape (gpt2: 12 layers, d 768, 12 heads; gpt2-medium: 24 layers, d 1024, 16 heads; both ctx
//     1024, vocab 50,257, tanh GELU, tied head; gpt2-test: 2 layers, d 64, 4 heads, ctx 32, batch 1, for smoke
//     tests) at --gpt2-batch x ctx tokens (default 8 x 1024). full: forward, backward, clipping, AdamW over every
//     parameter; lora: adapters of rank --lora-rank (alpha --lora-alpha) on qkv, o, fc_in, fc_out (GPT-2's c_attn,
//     attn.c_proj, c_fc, mlp.c_proj), only they trained. The program is `ptl program` of a checkpoint that
//     `ptl import-hf` makes of an all-zero GPT-2 folder (cached in --work; the weights are then set at random
//     here). buffer_gib: the buffers of the program's tensors (the weights and moments, and the rest sharing buffers by
//     liveness; buffer_gib_unshared: a buffer per tensor). A program that cannot load (a buffer
//     over the device's limits, out of memory) prints {"kind":"gpt2_step","model","variant","error"}.
//     flops_per_step = tokens x (full: 6 N + 12 L T d; lora: 4 N + 12 L T d + 6 r L (4d + 2d + 5d + 5d)), with
//     N = 12 L d^2 + V d the weights of the matrix products (the tied head included; biases, LayerNorms and the
//     embedding lookups left out), 12 L T d attention's two products forward and backward over the whole T x T
//     (no discount for the causal mask), 4 N the frozen weights' forward and input gradient, and the last term
//     the adapters' products forward and backward (sum of in + out over the four targets). With --gpt2 the
//     matmuls and the presets' steps run only when --matmul / --train ask for them.
//   {"kind":"generate","model","prompt_tokens","new_tokens","prefill_seq","prefill_ms_one_by_one",
//    "prefill_ms_blocks","prefill_speedup","prefill_tokens_per_s","decode_ms_per_token","decode_tokens_per_s"}
//     (--generate): generation with the KV cache (WebGPUGenerator, web/webgpu/src/generate.ts) of a GPT-2 shape
//     with random weights: a prompt of --prompt-tokens tokens taken one token a run (the generate program) and
//     --prefill-seq tokens a run (the prefill program, `ptl program --program generate --seq K`; the rest one at
//     a time), each the median of 5 after an untimed one, then --new-tokens greedy tokens one by one (each run
//     read back: the host picks the next token), after the blocked prompt. The one-by-one prompt is the peer.
//   {"kind":"summary","adapter", ...}
// Timing: after at least 0.5 s of untimed runs (the GPU clocks ramp up under load), `reps`
// products (at least 0.3 s of them) or `steps` training steps are recorded back to back and
// submitted at once, and the wall time until the queue is idle is divided by their number. Training uses random weights (N(0, 0.02), LayerNorm gains 1) and random tokens: speed
// does not depend on the values. The programs come from `ptl program`.
// Device: the default Vulkan driver (on a GPU machine, see bench/gpu_pack.sh);
// set VK_ICD_FILENAMES=/usr/lib/chromium/vk_swiftshader_icd.json for SwiftShader (tiny only).
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { benchArgs } from './args.mjs';
import { GPT2, gpt2Checkpoint } from './gpt2_shapes.mjs';

const args = benchArgs(
  import.meta.url,
  [
    'attn-rows',
    'bk',
    'dawn',
    'layouts',
    'ln-variants',
    'matmul',
    'min-ms',
    'presets',
    'ptl',
    'repeat',
    'reps',
    'split',
    'steps',
    'tag',
    'tile',
    'tiled',
    'train',
    'warm-s',
    'warmup',
    'gpt2',
    'gpt2-variants',
    'gpt2-batch',
    'lora-rank',
    'lora-alpha',
    'work',
    'generate',
    'prompt-tokens',
    'new-tokens',
    'prefill-seq',
  ],
  ['layernorm', 'nt', 'profile'],
);

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const DIST = path.join(ROOT, 'web', 'webgpu', 'dist');
if (!existsSync(path.join(DIST, 'node.js'))) {
  console.error('build the WebGPU package first: npm --prefix web ci && npm --prefix web/webgpu run build');
  process.exit(2);
}
const { createNodeBackend } = await import(path.join(DIST, 'node.js'));
const { tiledName } = await import(path.join(DIST, 'linear_gen.js'));

const PRESETS = {
  tiny: { layers: 2, d: 48, heads: 3, ctx: 32, batch: 16 },
  small: { layers: 3, d: 96, heads: 3, ctx: 64, batch: 16 },
  medium: { layers: 4, d: 128, heads: 4, ctx: 96, batch: 16 },
  large: { layers: 6, d: 192, heads: 6, ctx: 128, batch: 12 },
  xl: { layers: 8, d: 256, heads: 8, ctx: 128, batch: 8 },
  huge: { layers: 12, d: 256, heads: 8, ctx: 256, batch: 8 },
  massive: { layers: 14, d: 384, heads: 12, ctx: 256, batch: 4 },
  mega: { layers: 14, d: 384, heads: 12, ctx: 512, batch: 2 },
  behemoth: { layers: 24, d: 1280, heads: 20, ctx: 512, batch: 1 },
};
const presetArg = String(args.presets ?? 'tiny,small,medium,large,xl,huge,massive,mega,behemoth');
const presets = presetArg === 'all' ? Object.keys(PRESETS) : presetArg.split(',').filter(Boolean);
for (const p of presets) {
  if (!PRESETS[p]) {
    console.error(`bench/webgpu_bench.mjs: unknown preset '${p}' (${Object.keys(PRESETS).join(', ')}, or all)`);
    process.exit(2);
  }
}
// GPT-2's shapes (docs/gpt2.md); gpt2-test is a small one of GPT-2's vocabulary for smoke tests.
const gpt2Models = String(args.gpt2 ?? '')
  .split(',')
  .filter(Boolean);
const gpt2Variants = String(args['gpt2-variants'] ?? 'full,lora')
  .split(',')
  .filter(Boolean);
const genModels = String(args.generate ?? '')
  .split(',')
  .filter(Boolean);
for (const [opt, given, allowed] of [
  ['--gpt2', gpt2Models, Object.keys(GPT2)],
  ['--generate', genModels, Object.keys(GPT2)],
  ['--gpt2-variants', gpt2Variants, ['full', 'lora']],
]) {
  const bad = given.filter((x) => !allowed.includes(x));
  if (bad.length) {
    console.error(`bench/webgpu_bench.mjs: ${opt}: unknown ${bad.join(', ')} (choose from ${allowed.join(', ')})`);
    process.exit(2);
  }
}
const loraRank = Number(args['lora-rank'] ?? 16);
const loraAlpha = Number(args['lora-alpha'] ?? 32);
// With --gpt2 the matmuls and the presets' steps run only when asked for.
const gpt2Only = gpt2Models.length + genModels.length > 0;
const matmulMode = String(args.matmul ?? (gpt2Only ? 'none' : 'preset,4096'));
const steps = Number(args.steps ?? 20);
const warmup = Number(args.warmup ?? 3);
const reps = Number(args.reps ?? 20);
const warmS = Number(args['warm-s'] ?? 0.5);
const minMs = Number(args['min-ms'] ?? 300);
const layouts = String(args.layouts ?? 'fwd')
  .split(',')
  .filter(Boolean);
const doTrain = String(args.train ?? (gpt2Only ? '0' : '1')) !== '0';
const tag = args.tag ? String(args.tag) : undefined;
const ptl = String(args.ptl ?? process.env.PTL ?? path.join(ROOT, 'build-gpu', 'ptl'));

const tileOpt = args.tile ? Number(args.tile) : 'auto';
const splitOpt = args.split ? Number(args.split) : 'auto';
const rowsOpt = args['attn-rows'] ? Number(args['attn-rows']) : 'auto';
const bkOpt = args.bk ? Number(args.bk) : 'auto';
const ntOpt = args.nt === undefined ? 'auto' : String(args.nt) !== '0';
// --tiled a,b,...: several matmul variants in one process (one backend each on the same device;
// every shape is measured with each in turn, tagged with the variant).
// Besides configs of the generated kernel: auto (the default choice), off (the choice without the
// generated kernel), t64 (linear.wgsl), nt (linear_nt for the forward, linear_wide otherwise), wide.
const tiledList = String(args.tiled ?? 'auto')
  .split(',')
  .filter(Boolean);
const variantOptions = (cfg) =>
  ({
    t64: { matmulTiled: 'off', matmulTile: 64 },
    nt: { matmulTiled: 'off', matmulTile: 128, matmulNT: true },
    wide: { matmulTiled: 'off', matmulTile: 128, matmulNT: false },
  })[cfg] ?? { matmulTiled: cfg };
const gpu = await createNodeBackend(args.dawn ? String(args.dawn).split(';') : [], {
  matmulTile: tileOpt,
  matmulSplit: splitOpt,
  attentionRows: rowsOpt,
  matmulBK: bkOpt,
  matmulNT: ntOpt,
  ...variantOptions(tiledList[0]),
});
const { backend: be, device } = gpu;
const { WebGPUBackend, WebGPUGenerator, Sampler, planMemory } = await import(path.join(DIST, 'index.js'));
const baseOptions = {
  matmulTile: tileOpt,
  matmulSplit: splitOpt,
  attentionRows: rowsOpt,
  matmulBK: bkOpt,
  matmulNT: ntOpt,
};
const variants = tiledList.map((cfg, i) => ({
  cfg,
  be: i === 0 ? be : new WebGPUBackend(device, be.kernels, { ...baseOptions, ...variantOptions(cfg) }),
}));
const vtag = (cfg) => (tiledList.length > 1 ? (tag ? `${tag}:${cfg}` : cfg) : tag);
const emit = (o, tg = tag) => console.log(JSON.stringify(tg === undefined ? o : { tag: tg, ...o }));
const summary = {
  kind: 'summary',
  adapter: gpu.description,
  layernorm: [],
  matmul_tile: tileOpt,
  matmul_bk: bkOpt,
  matmul_nt: ntOpt,
  matmul_tiled: tiledList.join(','),
  maxComputeWorkgroupStorageSize: device.limits.maxComputeWorkgroupStorageSize,
  matmul_split: splitOpt,
  attention_rows: rowsOpt,
  dawn: args.dawn ?? null,
  features: [...gpu.adapter.features].filter((f) => /subgroup|timestamp|f16/.test(f)),
  maxStorageBufferBindingSize: device.limits.maxStorageBufferBindingSize,
  matmul: [],
  train: [],
};

function lcg(seed) {
  let s = seed >>> 0;
  return () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 4294967296) * 2 - 1;
}
const t = (name, shape, kind = 'activation') => ({ name, kind, dtype: 'f32', shape, trainable: false });

// Untimed runs until at least `seconds` have passed (GPU clocks ramp up under load).
async function warm(ex, seconds = warmS) {
  const t0 = performance.now();
  let n = 1;
  while (performance.now() - t0 < seconds * 1000) {
    await timeRuns(ex, n);
    n = Math.min(n * 2, 64);
  }
}

async function timeRuns(ex, count) {
  const encoder = device.createCommandEncoder();
  for (let i = 0; i < count; i++) ex.encode(encoder);
  const t0 = performance.now();
  device.queue.submit([encoder.finish()]);
  await device.queue.onSubmittedWorkDone();
  (ex.backend ?? be).check();
  return (performance.now() - t0) / count;
}

// Random weights for a training step (speed does not depend on the values): LayerNorm gains 1,
// biases 0, the rest spread like N(0, 0.02).
function setRandomParameters(params, r) {
  for (const tn of params) {
    const n = tn.shape.reduce((a, b) => a * b, 1);
    const data = new Float32Array(n);
    if (/ln\d?\.weight$|ln_f\.weight$/.test(tn.name)) data.fill(1);
    else if (!tn.name.endsWith('.bias')) for (let i = 0; i < n; i++) data[i] = r() * 0.035; // ~N(0, 0.02) spread
    be.setPersistent(tn.name, tn.shape, data);
  }
}

// A training program's steps on one batch (targets derived from the tokens): the first loss,
// `warmup` untimed steps and the clock warm-up, then `steps` timed back to back, and the last loss.
async function timeTraining(ex, tok, vocab) {
  ex.setInput('tokens', tok);
  ex.setInput(
    'targets',
    tok.map((x) => (x * 7 + 3) % vocab),
  );
  ex.setHparams(3e-4, 1);
  const first = (await ex.run(['loss'])).get('loss')[0];
  await timeRuns(ex, warmup);
  await warm(ex);
  const ms = await timeRuns(ex, steps);
  const last = (await ex.run(['loss'])).get('loss')[0];
  return { first, ms, last };
}

// ---- matmul: the three products of a Linear layer x[M,K], W[N,K], dy[M,N] ----------------------
//   fwd: y = x W^T [M,N]   dx: dy W [M,K]   dW: dy^T x [N,K]
async function benchMatmul(label, M, N, K, layout = 'fwd', repeat = 1) {
  const tensors = [t('x', [M, K]), t('W', [N, K]), t('y', [M, N])];
  let op;
  if (layout === 'fwd') op = { op: 'linear', inputs: [0, 1, -1], outputs: [2], attrs: {} };
  else {
    tensors.push(t('dx', [M, K]), t('dW', [N, K]));
    op = { op: 'linear_backward', inputs: [2, 0, 1], outputs: layout === 'dx' ? [3, -1, -1] : [-1, 4, -1], attrs: {} };
  }
  const program = { format: 'ptl-program', version: 1, name: `matmul ${layout} ${label}`, tensors, ops: [op] };
  const r = lcg(M * 31 + N * 7 + K);
  const x = Float32Array.from({ length: M * K }, r),
    W = Float32Array.from({ length: N * K }, r);
  let dy;
  if (layout !== 'fwd') dy = Float32Array.from({ length: M * N }, r);
  for (const v of variants) {
    let ex;
    try {
      ex = await v.be.load(program);
    } catch (e) {
      emit({ kind: 'matmul', layout, shape: label, M, N, K, error: String(e.message ?? e).slice(0, 300) }, vtag(v.cfg));
      continue;
    }
    ex.write('x', x);
    ex.write('W', W);
    if (layout !== 'fwd') ex.write('y', dy);
    const all = [];
    for (let rep = 0; rep < repeat; rep++) {
      await warm(ex);
      const est = await timeRuns(ex, 1);
      const n = Math.max(reps, Math.ceil(minMs / Math.max(est, 1e-3)));
      all.push(await timeRuns(ex, Math.min(n, 5000)));
    }
    const sorted = [...all].sort((p, q) => p - q);
    const ms = sorted[(sorted.length - 1) >> 1]; // median (lower middle)
    // Spot-check 16 outputs against a float64 dot product.
    const out = await ex.read(layout === 'fwd' ? 'y' : layout);
    let maxRel = 0;
    for (let s = 0; s < 16; s++) {
      let ref = 0,
        mag = 0,
        got;
      if (layout === 'fwd') {
        const i = (s * 7919) % M,
          j = (s * 104729) % N;
        for (let k = 0; k < K; k++) {
          ref += x[i * K + k] * W[j * K + k];
          mag += Math.abs(x[i * K + k] * W[j * K + k]);
        }
        got = out[i * N + j];
      } else if (layout === 'dx') {
        const i = (s * 7919) % M,
          k = (s * 104729) % K;
        for (let j = 0; j < N; j++) {
          ref += dy[i * N + j] * W[j * K + k];
          mag += Math.abs(dy[i * N + j] * W[j * K + k]);
        }
        got = out[i * K + k];
      } else {
        const j = (s * 7919) % N,
          k = (s * 104729) % K;
        for (let i = 0; i < M; i++) {
          ref += dy[i * N + j] * x[i * K + k];
          mag += Math.abs(dy[i * N + j] * x[i * K + k]);
        }
        got = out[j * K + k];
      }
      maxRel = Math.max(maxRel, Math.abs(got - ref) / Math.max(mag, 1e-30));
    }
    const kname = (sp) =>
      sp.kernel === 'linear_tiled'
        ? `tiled:${tiledName(sp.defines)}`
        : `${sp.kernel}${sp.defines?.BK ? `/bk${sp.defines.BK}` : ''}`;
    const kernel = ex.specs
      ? [...new Set(ex.specs.map((sp) => `${kname(sp)}${/split/.test(sp.label) ? '+split' : ''}`))].join(',')
      : undefined;
    ex.destroy();
    const gf = (t) => +((2 * M * N * K) / (t * 1e6)).toPrecision(4);
    const o = {
      kind: 'matmul',
      layout,
      shape: label,
      M,
      N,
      K,
      ms: +ms.toFixed(4),
      gflops: gf(ms),
      max_rel_err: maxRel,
      kernel,
    };
    if (repeat > 1) Object.assign(o, { repeats: repeat, gflops_best: gf(sorted[0]), gflops_all: all.map(gf) });
    summary.matmul.push({ variant: v.cfg, layout, shape: label, gflops: o.gflops });
    emit(o, vtag(v.cfg));
  }
}

if (matmulMode !== 'none') {
  const modes = matmulMode.split(',');
  if (modes.includes('preset'))
    for (const p of presets) {
      const c = PRESETS[p];
      const M = c.batch * c.ctx;
      for (const l of layouts) {
        await benchMatmul(`${p} qkv/o`, M, c.d, c.d, l);
        await benchMatmul(`${p} fc_in`, M, 4 * c.d, c.d, l);
        await benchMatmul(`${p} fc_out`, M, c.d, 4 * c.d, l);
        await benchMatmul(`${p} lm_head`, M, 256, c.d, l);
      }
    }
  if (modes.includes('4096'))
    for (const l of layouts) await benchMatmul('4096^3', 4096, 4096, 4096, l, Number(args.repeat ?? 1));
}

// ---- layernorm: forward and backward per variant of the row reductions ----------------------------
async function benchLayernorm(N, C, variantNames, repeat = 1) {
  const eps = 1e-5;
  // mean and rstd are 'state' (kept in the variant's store): the backward reads what its forward wrote.
  const st = (name, shape) => ({ ...t(name, shape), kind: 'state' });
  const fwd = {
    format: 'ptl-program',
    version: 1,
    name: `layernorm ${N}x${C}`,
    tensors: [t('x', [N, C]), t('w', [C]), t('b', [C]), t('y', [N, C]), st('mean', [N]), st('rstd', [N])],
    ops: [{ op: 'layernorm', inputs: [0, 1, 2], outputs: [3, 4, 5], attrs: { eps } }],
  };
  const bwd = (dwdb) => ({
    format: 'ptl-program',
    version: 1,
    name: `layernorm_backward ${N}x${C}${dwdb ? '' : ' dx'}`,
    tensors: [
      t('dy', [N, C]),
      t('x', [N, C]),
      t('w', [C]),
      st('mean', [N]),
      st('rstd', [N]),
      t('dx', [N, C]),
      t('dw', [C]),
      t('db', [C]),
    ],
    ops: [{ op: 'layernorm_backward', inputs: [0, 1, 2, 3, 4], outputs: dwdb ? [5, 6, 7] : [5, -1, -1], attrs: {} }],
  });
  const r = lcg(N * 7 + C);
  const x = Float32Array.from({ length: N * C }, () => r() * 2 + 0.5);
  const dy = Float32Array.from({ length: N * C }, r);
  const w = Float32Array.from({ length: C }, () => 1 + 0.1 * r()),
    b = Float32Array.from({ length: C }, () => 0.1 * r());
  const runs = [];
  for (const v of variantNames) {
    try {
      const vb = new WebGPUBackend(device, be.kernels, { ...baseOptions, reductions: v });
      const exs = { fwd: await vb.load(fwd), bwd: await vb.load(bwd(true)), dx: await vb.load(bwd(false)) };
      exs.fwd.write('x', x);
      exs.fwd.write('w', w);
      exs.fwd.write('b', b);
      exs.fwd.run();
      for (const e of [exs.bwd, exs.dx]) {
        e.write('dy', dy);
        e.write('x', x);
        e.write('w', w);
      }
      runs.push({ v, vb, exs, all: { fwd: [], bwd: [], dx: [] } });
    } catch (e) {
      emit({ bench: 'layernorm', variant: v, N, C, error: String(e.message ?? e).slice(0, 300) });
    }
  }
  // Interleaved: every repetition measures each variant in turn (clock drift hits them alike).
  for (let rep = 0; rep < repeat; rep++)
    for (const run of runs)
      for (const k of ['fwd', 'bwd', 'dx']) {
        const ex = run.exs[k];
        await warm(ex);
        const est = await timeRuns(ex, 1);
        run.all[k].push(await timeRuns(ex, Math.min(Math.max(reps, Math.ceil(minMs / Math.max(est, 1e-3))), 5000)));
      }
  const median = (a) => [...a].sort((p, q) => p - q)[(a.length - 1) >> 1];
  for (const run of runs) {
    // Spot check against float64: mean, rstd and dx of 4 rows.
    const [mean, rstd] = [await run.exs.fwd.read('mean'), await run.exs.fwd.read('rstd')];
    const dx = await run.exs.dx.read('dx');
    let err = 0;
    for (let s = 0; s < 4; s++) {
      const i = (s * 7919) % N,
        o = i * C;
      let m = 0,
        q = 0;
      for (let c = 0; c < C; c++) m += x[o + c];
      m /= C;
      for (let c = 0; c < C; c++) q += (x[o + c] - m) ** 2;
      const rs = 1 / Math.sqrt(q / C + eps);
      let gs = 0,
        gxs = 0;
      for (let c = 0; c < C; c++) {
        const g = dy[o + c] * w[c];
        gs += g;
        gxs += g * (x[o + c] - m) * rs;
      }
      err = Math.max(err, Math.abs(mean[i] - m), Math.abs(rstd[i] - rs));
      for (let c = 0; c < C; c++)
        err = Math.max(err, Math.abs(dx[o + c] - rs * (dy[o + c] * w[c] - gs / C - (x[o + c] - m) * rs * (gxs / C))));
    }
    const [f, bw, d] = [median(run.all.fwd), median(run.all.bwd), median(run.all.dx)];
    const o = {
      bench: 'layernorm',
      variant: run.v,
      N,
      C,
      ms_fwd: +f.toFixed(4),
      ms_bwd: +bw.toFixed(4),
      ms_dx: +d.toFixed(4),
      GB_s: +((7 * N * C * 4) / ((f + bw) * 1e6)).toPrecision(4),
      max_abs_err: +err.toExponential(2),
    };
    if (repeat > 1)
      Object.assign(o, {
        repeats: repeat,
        ms_fwd_all: run.all.fwd.map((m) => +m.toFixed(4)),
        ms_bwd_all: run.all.bwd.map((m) => +m.toFixed(4)),
      });
    summary.layernorm.push({ variant: run.v, N, C, ms_fwd: o.ms_fwd, ms_bwd: o.ms_bwd });
    emit(o);
    for (const e of Object.values(run.exs)) e.destroy();
    run.vb.clearStore();
  }
}

if (args.layernorm && args.layernorm !== true && String(args.layernorm) !== 'none') {
  const lnVariants = String(args['ln-variants'] ?? 'subgroup,workgroup')
    .split(',')
    .filter(Boolean);
  for (const shape of String(args.layernorm).split(',').filter(Boolean)) {
    const m = /^(\d+)x(\d+)$/.exec(shape);
    if (!m) {
      console.error(`--layernorm: bad shape '${shape}' (expected NxC, e.g. 8192x768)`);
      process.exit(2);
    }
    await benchLayernorm(+m[1], +m[2], lnVariants, Number(args.repeat ?? 1));
  }
}

// ---- training steps ------------------------------------------------------------------------------
for (const p of doTrain ? presets : []) {
  const c = PRESETS[p];
  const program = JSON.parse(
    execFileSync(ptl, ['program', '--preset', p, '--program', 'train'], { encoding: 'utf8', maxBuffer: 1 << 28 }),
  );
  const r = lcg(7);
  setRandomParameters(
    program.tensors.filter((x) => x.kind === 'parameter'),
    r,
  );
  const t0 = performance.now();
  const ex = await be.load(program);
  const loadS = (performance.now() - t0) / 1000;
  const tokens = ex.tensor('tokens').info.shape.reduce((a, b) => a * b, 1);
  const tok = Int32Array.from({ length: tokens }, () => Math.floor((r() + 1) * 127.99));
  const { first, ms, last } = await timeTraining(ex, tok, 256);
  const o = {
    kind: 'train_step',
    preset: p,
    batch: c.batch,
    ms_per_step: +ms.toFixed(3),
    tokens_per_s: Math.round((tokens / ms) * 1000),
    dispatches: ex.dispatchCount,
    load_s: +loadS.toFixed(2),
    loss_first: first,
    loss_last: last,
  };
  emit(o);
  summary.train.push({ preset: p, ms_per_step: o.ms_per_step });
  if (args.profile) {
    const prof = await ex.profile();
    emit({
      kind: 'profile',
      preset: p,
      ms: Object.fromEntries(
        [...prof.entries()].sort((a, b) => b[1] - a[1]).map(([k, v]) => [k, +(v * 1000).toFixed(3)]),
      ),
    });
  }
  ex.destroy();
  be.clearStore(); // drop this preset's weights and moments before the next
}
// ---- GPT-2 training steps (--gpt2) ---------------------------------------------------------------
// Floating-point operations of one step (see the header comment for the formula).
function gpt2Flops(m, tokens, variant, seq) {
  const { layers: L, d, vocab: V } = m;
  const N = 12 * L * d * d + V * d;
  const attn = 12 * L * seq * d;
  const perToken = variant === 'full' ? 6 * N + attn : 4 * N + attn + 6 * loraRank * L * 16 * d;
  return perToken * tokens;
}

for (const name of gpt2Models)
  for (const variant of gpt2Variants) {
    const m = GPT2[name];
    const batch = Number(args['gpt2-batch'] ?? m.batch);
    const base = { kind: 'gpt2_step', model: name, variant, batch, seq: m.ctx };
    if (variant === 'lora') Object.assign(base, { lora_rank: loraRank, lora_alpha: loraAlpha });
    let ex;
    try {
      const pargs = [
        'program',
        gpt2Checkpoint(ptl, String(args.work ?? os.tmpdir()), name, m),
        '--program',
        'train',
        '--batch',
        String(batch),
      ];
      if (variant === 'lora')
        pargs.push(
          '--lora-rank',
          String(loraRank),
          '--lora-alpha',
          String(loraAlpha),
          '--lora-targets',
          'qkv,o,fc_in,fc_out',
        );
      const program = JSON.parse(execFileSync(ptl, pargs, { encoding: 'utf8', maxBuffer: 1 << 28 }));
      const numelOf = (tn) => tn.shape.reduce((a, b) => a * b, 1);
      const params = program.tensors.filter((x) => x.kind === 'parameter');
      base.params = params.reduce((a, tn) => a + numelOf(tn), 0);
      base.trainable_params = params.filter((tn) => tn.trainable).reduce((a, tn) => a + numelOf(tn), 0);
      // The persistent tensors (weights, moments) and the buffers the program's other tensors share by
      // liveness (web/webgpu/src/memory.ts); unshared: a buffer per tensor.
      const persistentBytes = program.tensors
        .filter((tn) => ['parameter', 'optim_state', 'state'].includes(tn.kind))
        .reduce((a, tn) => a + numelOf(tn) * 4, 0);
      const plan = planMemory(program);
      base.buffer_gib = +((persistentBytes + plan.bytes) / 2 ** 30).toFixed(2);
      base.buffer_gib_unshared = +((persistentBytes + plan.unshared) / 2 ** 30).toFixed(2);
      const r = lcg(11);
      setRandomParameters(params, r);
      const t0 = performance.now();
      ex = await be.load(program);
      const loadS = (performance.now() - t0) / 1000;
      const tokens = ex.tensor('tokens').info.shape.reduce((a, b) => a * b, 1);
      const tok = Int32Array.from({ length: tokens }, () =>
        Math.min(m.vocab - 1, Math.floor(((r() + 1) / 2) * m.vocab)),
      );
      const { first, ms, last } = await timeTraining(ex, tok, m.vocab);
      const flops = gpt2Flops(m, tokens, variant, m.ctx);
      emit({
        ...base,
        ms_per_step: +ms.toFixed(3),
        tokens_per_s: Math.round((tokens / ms) * 1000),
        flops_per_step: flops,
        tflops: +(flops / (ms * 1e9)).toFixed(2),
        steps,
        dispatches: ex.dispatchCount,
        load_s: +loadS.toFixed(2),
        loss_first: first,
        loss_last: last,
      });
      summary.train.push({ model: name, variant, ms_per_step: +ms.toFixed(3) });
    } catch (e) {
      emit({ ...base, error: String(e.message ?? e).slice(0, 500) });
    }
    ex?.destroy();
    be.clearStore();
  }

// ---- Generation with the KV cache (--generate) -----------------------------------------------------
const promptTokens = Number(args['prompt-tokens'] ?? 64);
const newTokens = Number(args['new-tokens'] ?? 64);
const prefillSeq = Number(args['prefill-seq'] ?? 32);
summary.generate = [];
for (const name of genModels) {
  const m = GPT2[name];
  const P = Math.min(promptTokens, m.ctx - newTokens);
  const K = Math.min(prefillSeq, P);
  const base = { kind: 'generate', model: name, prompt_tokens: P, new_tokens: newTokens, prefill_seq: K };
  const gens = [];
  try {
    if (P < 1) throw new Error(`--new-tokens ${newTokens} leaves no room for a prompt in the context of ${m.ctx}`);
    const ckpt = gpt2Checkpoint(ptl, String(args.work ?? os.tmpdir()), name, m);
    const program = (...extra) =>
      JSON.parse(
        execFileSync(ptl, ['program', ckpt, '--program', 'generate', ...extra], {
          encoding: 'utf8',
          maxBuffer: 1 << 28,
        }),
      );
    const generate = program();
    setRandomParameters(
      generate.tensors.filter((x) => x.kind === 'parameter'),
      lcg(11),
    );
    const oneByOne = await WebGPUGenerator.create(be, generate);
    gens.push(oneByOne);
    const blocks = await WebGPUGenerator.create(be, generate, undefined, program('--seq', String(K)));
    gens.push(blocks);
    const r = lcg(5);
    const prompt = Array.from({ length: P }, () => Math.floor(((r() + 1) / 2) * (m.vocab - 1)));
    const timePrompt = async (g) => {
      await g.prefill(prompt); // untimed: pipelines, clocks
      const ms = [];
      for (let i = 0; i < 5; i++) {
        const t0 = performance.now();
        await g.prefill(prompt);
        ms.push(performance.now() - t0);
      }
      return ms.sort((a, b) => a - b)[2];
    };
    const single = await timePrompt(oneByOne);
    const blocked = await timePrompt(blocks);
    let logits = await blocks.prefill(prompt);
    const t0 = performance.now();
    for (let i = 0; i < newTokens; i++) logits = await blocks.next(Sampler.argmax(logits));
    const decodeMs = (performance.now() - t0) / newTokens;
    const row = {
      ...base,
      prefill_ms_one_by_one: +single.toFixed(2),
      prefill_ms_blocks: +blocked.toFixed(2),
      prefill_speedup: +(single / blocked).toFixed(2),
      prefill_tokens_per_s: Math.round((P / blocked) * 1000),
      decode_ms_per_token: +decodeMs.toFixed(3),
      decode_tokens_per_s: Math.round(1000 / decodeMs),
    };
    emit(row);
    summary.generate.push(row);
  } catch (e) {
    emit({ ...base, error: String(e.message ?? e).slice(0, 500) });
  }
  for (const g of gens) g.destroy();
  be.clearStore();
}

emit(summary);
device.destroy();
process.exit(0);
