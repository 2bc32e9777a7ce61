// Every WGSL kernel against its C++ twin on the same random inputs, ragged shapes included.
//
// Each case is a one-op program. The inputs (and the initial contents of the outputs, which
// matter where acc<i> = 1) are drawn here, written to a safetensors file and run through the CPU
// executor by `ptl_program_run kernel`; the same values go to the WebGPU executor. Every output
// must satisfy |gpu - cpu| <= atol + rtol * |cpu| element-wise (fp32 tolerances below).
import assert from 'node:assert/strict';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, test } from 'node:test';

import { WebGPUBackend, decodeSafeTensors, encodeSafeTensors } from '../dist/index.js';
import { kernelsFromDir } from '../dist/node.js';
import { OUT, backend, closeBackend, compare, rng, run, tool } from './helpers.mjs';

// Tolerances, by what the kernel computes (fp32 throughout; the CPU sums some reductions in
// double, the GPU sums in a different order, and WGSL exp/log/sqrt are not correctly rounded):
const TOL = {
  exact: { atol: 0, rtol: 0 }, // same operations in the same order
  elementwise: { atol: 1e-6, rtol: 1e-6 },
  transcendental: { atol: 2e-6, rtol: 1e-5 }, // erf/exp
  reduction: { atol: 2e-5, rtol: 1e-4 }, // sums over up to a few hundred terms
  optimizer: { atol: 1e-6, rtol: 1e-5 },
};

const results = [];
const dir = join(OUT, 'kernels');
mkdirSync(dir, { recursive: true });

// tensors: {name: {shape, dtype?, init?: 'normal' | 'zero' | 'positive' | Array}}; op refers to names.
async function check(caseName, spec) {
  const { tensors, op, tol, seed = 1, compareOutputs } = spec;
  const r = rng(seed);
  const names = Object.keys(tensors);
  const id = (n) => (n === null ? -1 : names.indexOf(n));
  const program = {
    format: 'ptl-program', version: 1, name: caseName,
    tensors: names.map((n) => ({ name: n, kind: tensors[n].kind ?? 'activation', dtype: tensors[n].dtype ?? 'f32', shape: tensors[n].shape, trainable: false })),
    ops: [{ op: op.op, inputs: op.inputs.map(id), outputs: op.outputs.map(id), attrs: op.attrs ?? {} }],
  };
  const values = {};
  for (const n of names) {
    const t = tensors[n];
    const count = t.shape.reduce((a, b) => a * b, 1);
    let v;
    if (Array.isArray(t.init)) v = t.init;
    else if (typeof t.init === 'function') v = Array.from({ length: count }, (_, i) => t.init(r, i));
    else if (t.init === 'zero' || t.init === undefined) v = new Array(count).fill(0);
    else if (t.init === 'positive') v = Array.from({ length: count }, () => Math.abs(r.normal()) * 0.01);
    else v = Array.from({ length: count }, () => r.normal() * (t.scale ?? 1));
    values[n] = (t.dtype ?? 'f32') === 'i32' ? Int32Array.from(v) : Float32Array.from(v);
  }
  const base = join(dir, caseName.replace(/[^a-z0-9_]+/gi, '_'));
  if (spec.withForward) {
    // y and lse of attention_backward must be the forward's: take them from the CPU forward.
    const fwd = { ...program, name: `${caseName} forward`, ops: [{ op: 'attention', inputs: [id('q'), id('k'), id('v')], outputs: [id('y'), id('lse')], attrs: { heads: op.attrs.heads } }] };
    writeFileSync(`${base}.fwd.json`, JSON.stringify(fwd));
    writeFileSync(`${base}.fwd.in.safetensors`, encodeSafeTensors({ metadata: {}, tensors: ['q', 'k', 'v'].map((n) => ({ name: n, dtype: 'F32', shape: tensors[n].shape, data: values[n] })) }));
    run(tool('ptl_program_run'), ['kernel', '--program', `${base}.fwd.json`, '--in', `${base}.fwd.in.safetensors`, '--out', `${base}.fwd.out.safetensors`]);
    for (const t of decodeSafeTensors(new Uint8Array(readFileSync(`${base}.fwd.out.safetensors`))).tensors)
      if (t.name === 'y' || t.name === 'lse') values[t.name] = t.data;
  }
  writeFileSync(`${base}.json`, JSON.stringify(program));
  writeFileSync(`${base}.in.safetensors`, encodeSafeTensors({
    metadata: {},
    tensors: names.map((n) => ({ name: n, dtype: values[n] instanceof Int32Array ? 'I32' : 'F32', shape: tensors[n].shape, data: values[n] })),
  }));
  run(tool('ptl_program_run'), ['kernel', '--program', `${base}.json`, '--in', `${base}.in.safetensors`, '--out', `${base}.out.safetensors`]);
  const cpu = new Map(decodeSafeTensors(new Uint8Array(readFileSync(`${base}.out.safetensors`))).tensors.map((t) => [t.name, t.data]));

  const { backend: shared, device } = await backend();
  const be = spec.matmulTile || spec.matmulSplit || spec.attentionRows
    ? new WebGPUBackend(device, kernelsFromDir(),
      { matmulTile: spec.matmulTile ?? 'auto', matmulSplit: spec.matmulSplit ?? 'auto', attentionRows: spec.attentionRows ?? 'auto' })
    : shared;
  const ex = await be.load(program);
  for (const n of names) {
    if (n === 'optim.hparams') ex.setInput(n, values[n]);
    else ex.write(n, values[n]);
  }
  ex.run();
  const outs = compareOutputs ?? op.outputs.filter((n) => n !== null);
  const report = { kernel: op.op, case: caseName, matmul_tile: spec.matmulTile ?? 'auto', matmul_split: spec.matmulSplit ?? 'auto', attention_rows: spec.attentionRows ?? 'auto', outputs: {}, atol: tol.atol, rtol: tol.rtol, passed: true };
  for (const n of new Set(outs)) {
    const got = await ex.read(n);
    const c = compare(got, cpu.get(n), tol.atol, tol.rtol);
    report.outputs[n] = { max_abs: c.maxAbs, max_rel: c.maxRel, n: got.length };
    if (!c.ok) {
      report.passed = false;
      report.outputs[n].first_bad = { index: c.worst, gpu: got[c.worst], cpu: cpu.get(n)[c.worst] };
    }
  }
  ex.destroy();
  results.push(report);
  const summary = Object.entries(report.outputs).map(([n, o]) => `${n}: abs ${o.max_abs.toExponential(2)} rel ${o.max_rel.toExponential(2)}`).join('; ');
  console.log(`${report.passed ? 'ok  ' : 'FAIL'} ${caseName} [atol ${tol.atol}, rtol ${tol.rtol}] ${summary}`);
  assert.ok(report.passed, `${caseName}: ${JSON.stringify(report.outputs)}`);
}

const tok = (V) => (r) => r.int(V);

// ---- embedding ---------------------------------------------------------------------------------
test('embedding ragged', () => check('embedding ragged', {
  tol: TOL.elementwise,
  tensors: { tokens: { shape: [2, 5], dtype: 'i32', init: tok(11) }, tok_emb: { shape: [11, 7], init: 'normal' },
    pos_emb: { shape: [6, 7], init: 'normal' }, x: { shape: [2, 5, 7] } },
  op: { op: 'embedding', inputs: ['tokens', 'tok_emb', 'pos_emb', null], outputs: ['x'] },
}));
test('embedding pos0', () => check('embedding pos0', {
  tol: TOL.elementwise,
  tensors: { tokens: { shape: [1, 4], dtype: 'i32', init: tok(9) }, tok_emb: { shape: [9, 6], init: 'normal' },
    pos_emb: { shape: [8, 6], init: 'normal' }, pos0: { shape: [1], dtype: 'i32', init: [3] }, x: { shape: [1, 4, 6] } },
  op: { op: 'embedding', inputs: ['tokens', 'tok_emb', 'pos_emb', 'pos0'], outputs: ['x'] },
}));
test('embedding_backward acc tok', () => check('embedding_backward acc tok', {
  tol: TOL.exact,
  tensors: { dx: { shape: [3, 5, 7], init: 'normal' }, tokens: { shape: [3, 5], dtype: 'i32', init: tok(6) },
    dtok: { shape: [6, 7], init: 'normal' }, dpos: { shape: [6, 7], init: 'normal' } },
  op: { op: 'embedding_backward', inputs: ['dx', 'tokens', null], outputs: ['dtok', 'dpos'], attrs: { acc0: 1, acc1: 0 } },
}));
test('embedding_backward acc pos, pos0, wide', () => check('embedding_backward acc pos pos0 wide', {
  tol: TOL.exact, seed: 2,
  tensors: { dx: { shape: [2, 3, 530], init: 'normal' }, tokens: { shape: [2, 3], dtype: 'i32', init: tok(4) },
    pos0: { shape: [1], dtype: 'i32', init: [2] }, dtok: { shape: [4, 530], init: 'normal' }, dpos: { shape: [5, 530], init: 'normal' } },
  op: { op: 'embedding_backward', inputs: ['dx', 'tokens', 'pos0'], outputs: ['dtok', 'dpos'], attrs: { acc0: 0, acc1: 1 } },
}));

// ---- layernorm ---------------------------------------------------------------------------------
for (const [C, N] of [[37, 6], [130, 5], [48, 128]]) {
  test(`layernorm C=${C}`, () => check(`layernorm C=${C}`, {
    tol: TOL.reduction, seed: C,
    tensors: { x: { shape: [N, C], init: (r) => r.normal() * 2 + 0.5 }, w: { shape: [C], init: 'normal' }, b: { shape: [C], init: 'normal' },
      y: { shape: [N, C] }, mean: { shape: [N] }, rstd: { shape: [N] } },
    op: { op: 'layernorm', inputs: ['x', 'w', 'b'], outputs: ['y', 'mean', 'rstd'], attrs: { eps: 1e-5 } },
  }));
}
for (const [C, N, accs] of [[37, 6, [1, 0, 1]], [130, 70, [0, 1, 0]]]) {
  test(`layernorm_backward C=${C} acc=${accs}`, async () => {
    // mean and rstd come from the CPU forward on the same x, as in a real program.
    const r = rng(C + 100);
    const x = Array.from({ length: N * C }, () => r.normal() * 2 + 0.5);
    const mean = [], rstd = [];
    for (let i = 0; i < N; i++) {
      const row = x.slice(i * C, (i + 1) * C).map(Math.fround);
      const m = row.reduce((a, b) => a + b, 0) / C;
      const v = row.reduce((a, b) => a + (b - m) * (b - m), 0) / C;
      mean.push(m); rstd.push(1 / Math.sqrt(v + 1e-5));
    }
    await check(`layernorm_backward C=${C} acc=${accs}`, {
      tol: TOL.reduction, seed: C,
      tensors: { dy: { shape: [N, C], init: 'normal' }, x: { shape: [N, C], init: x }, w: { shape: [C], init: 'normal' },
        mean: { shape: [N], init: mean }, rstd: { shape: [N], init: rstd },
        dx: { shape: [N, C], init: 'normal' }, dw: { shape: [C], init: 'normal' }, db: { shape: [C], init: 'normal' } },
      op: { op: 'layernorm_backward', inputs: ['dy', 'x', 'w', 'mean', 'rstd'], outputs: ['dx', 'dw', 'db'],
        attrs: { acc0: accs[0], acc1: accs[1], acc2: accs[2] } },
    });
  });
}

// ---- linear ------------------------------------------------------------------------------------
for (const [M, K, N, bias] of [[67, 45, 70, true], [64, 48, 128, false], [5, 3, 2, true], [130, 192, 48, true]]) {
  test(`linear M=${M} K=${K} N=${N}${bias ? ' bias' : ''}`, () => check(`linear M=${M} K=${K} N=${N}${bias ? ' bias' : ''}`, {
    tol: TOL.reduction, seed: M * K + N,
    tensors: { x: { shape: [M, K], init: 'normal' }, W: { shape: [N, K], init: 'normal', scale: 0.2 }, b: { shape: [N], init: 'normal' },
      y: { shape: [M, N] } },
    op: { op: 'linear', inputs: ['x', 'W', bias ? 'b' : null], outputs: ['y'] },
  }));
}
for (const [M, K, N, outs, accs] of [
  [67, 45, 70, ['dx', 'dW', 'db'], [1, 0, 1]],
  [128, 48, 192, ['dx', 'dW', 'db'], [0, 1, 0]],
  [33, 20, 9, [null, 'dW', null], [0, 0, 0]],
  [3, 5, 256, ['dx', 'dW', null], [0, 1, 0]],
]) {
  const name = `linear_backward M=${M} K=${K} N=${N} out=${outs.map((o) => o ?? '-')} acc=${accs}`;
  test(name, () => check(name, {
    tol: TOL.reduction, seed: M + K * N,
    tensors: { dy: { shape: [M, N], init: 'normal' }, x: { shape: [M, K], init: 'normal' }, W: { shape: [N, K], init: 'normal', scale: 0.2 },
      dx: { shape: [M, K], init: 'normal' }, dW: { shape: [N, K], init: 'normal' }, db: { shape: [N], init: 'normal' } },
    op: { op: 'linear_backward', inputs: ['dy', 'x', 'W'], outputs: outs, attrs: { acc0: accs[0], acc1: accs[1], acc2: accs[2] } },
    compareOutputs: ['dx', 'dW', 'db'], // absent outputs must stay untouched
  }));
}

// The 128 x 128 tiles (8 x 8 per thread) that large products get, forced on ragged shapes.
test('linear 128-tile M=133 K=45 N=70 bias', () => check('linear 128-tile M=133 K=45 N=70 bias', {
  tol: TOL.reduction, seed: 3, matmulTile: 128,
  tensors: { x: { shape: [133, 45], init: 'normal' }, W: { shape: [70, 45], init: 'normal', scale: 0.2 }, b: { shape: [70], init: 'normal' },
    y: { shape: [133, 70] } },
  op: { op: 'linear', inputs: ['x', 'W', 'b'], outputs: ['y'] },
}));
test('linear_backward 128-tile M=131 K=48 N=67 acc=1,0,0', () => check('linear_backward 128-tile M=131 K=48 N=67 acc=1,0,0', {
  tol: TOL.reduction, seed: 4, matmulTile: 128,
  tensors: { dy: { shape: [131, 67], init: 'normal' }, x: { shape: [131, 48], init: 'normal' }, W: { shape: [67, 48], init: 'normal', scale: 0.2 },
    dx: { shape: [131, 48], init: 'normal' }, dW: { shape: [67, 48], init: 'normal' }, db: { shape: [67], init: 'normal' } },
  op: { op: 'linear_backward', inputs: ['dy', 'x', 'W'], outputs: ['dx', 'dW', 'db'], attrs: { acc0: 1, acc1: 0, acc2: 0 } },
}));

// Split-K (partial products over chunks of P, then a fixed-order sum), forced on ragged shapes.
test('linear split-K 3 M=37 K=70 N=29 bias', () => check('linear split-K 3 M=37 K=70 N=29 bias', {
  tol: TOL.reduction, seed: 5, matmulSplit: 3,
  tensors: { x: { shape: [37, 70], init: 'normal' }, W: { shape: [29, 70], init: 'normal', scale: 0.2 }, b: { shape: [29], init: 'normal' },
    y: { shape: [37, 29] } },
  op: { op: 'linear', inputs: ['x', 'W', 'b'], outputs: ['y'] },
}));
test('linear_backward split-K 4 128-tile M=300 K=36 N=20 acc=0,1,1', () => check('linear_backward split-K 4 128-tile M=300 K=36 N=20 acc=0,1,1', {
  tol: TOL.reduction, seed: 6, matmulSplit: 4, matmulTile: 128,
  tensors: { dy: { shape: [300, 20], init: 'normal' }, x: { shape: [300, 36], init: 'normal' }, W: { shape: [20, 36], init: 'normal', scale: 0.2 },
    dx: { shape: [300, 36], init: 'normal' }, dW: { shape: [20, 36], init: 'normal' }, db: { shape: [20], init: 'normal' } },
  op: { op: 'linear_backward', inputs: ['dy', 'x', 'W'], outputs: ['dx', 'dW', 'db'], attrs: { acc0: 0, acc1: 1, acc2: 1 } },
}));

// ---- attention ---------------------------------------------------------------------------------
for (const [B, T, C, H, rows] of [[2, 7, 12, 3], [1, 70, 32, 2], [1, 70, 32, 2, 32], [2, 20, 96, 2], [4, 32, 48, 3]]) {
  const name = `attention B=${B} T=${T} C=${C} H=${H}${rows ? ` rows=${rows}` : ''}`;
  test(name, () => check(name, {
    tol: TOL.reduction, seed: T * C, attentionRows: rows,
    tensors: { q: { shape: [B, T, C], init: 'normal' }, k: { shape: [B, T, C], init: 'normal' }, v: { shape: [B, T, C], init: 'normal' },
      y: { shape: [B, T, C] }, lse: { shape: [B, H, T] } },
    op: { op: 'attention', inputs: ['q', 'k', 'v'], outputs: ['y', 'lse'], attrs: { heads: H } },
  }));
}
for (const [B, T, C, H, accs, rows] of [[2, 7, 12, 3, [0, 1, 0]], [1, 70, 32, 2, [1, 0, 1]], [1, 70, 32, 2, [1, 0, 1], 32], [2, 20, 96, 2, [0, 0, 0]]]) {
  const name = `attention_backward B=${B} T=${T} C=${C} H=${H} acc=${accs}${rows ? ` rows=${rows}` : ''}`;
  test(name, async () => {
    // y and lse must be the forward's: run the CPU forward first through a two-op program.
    await check(name, {
      tol: TOL.reduction, seed: T * C + 1,
      tensors: { q: { shape: [B, T, C], init: 'normal' }, k: { shape: [B, T, C], init: 'normal' }, v: { shape: [B, T, C], init: 'normal' },
        dy: { shape: [B, T, C], init: 'normal' }, y: { shape: [B, T, C] }, lse: { shape: [B, H, T] },
        dq: { shape: [B, T, C], init: 'normal' }, dk: { shape: [B, T, C], init: 'normal' }, dv: { shape: [B, T, C], init: 'normal' } },
      op: { op: 'attention_backward', inputs: ['dy', 'q', 'k', 'v', 'y', 'lse'], outputs: ['dq', 'dk', 'dv'],
        attrs: { heads: H, acc0: accs[0], acc1: accs[1], acc2: accs[2] } },
      withForward: true, attentionRows: rows,
    });
  });
}

// ---- gelu, add ---------------------------------------------------------------------------------
test('gelu', () => check('gelu', {
  tol: TOL.transcendental,
  tensors: { x: { shape: [1001], init: (r, i) => (i < 200 ? (i - 100) / 10 : r.normal() * 3) }, y: { shape: [1001] } },
  op: { op: 'gelu', inputs: ['x'], outputs: ['y'] },
}));
test('gelu_backward acc', () => check('gelu_backward acc', {
  tol: TOL.transcendental,
  tensors: { dy: { shape: [3, 337], init: 'normal' }, x: { shape: [3, 337], init: (r) => r.normal() * 3 }, dx: { shape: [3, 337], init: 'normal' } },
  op: { op: 'gelu_backward', inputs: ['dy', 'x'], outputs: ['dx'], attrs: { acc0: 1 } },
}));
test('add alpha=-0.5', () => check('add alpha=-0.5', {
  tol: TOL.elementwise,
  tensors: { a: { shape: [1001], init: 'normal' }, b: { shape: [1001], init: 'normal' }, y: { shape: [1001] } },
  op: { op: 'add', inputs: ['a', 'b'], outputs: ['y'], attrs: { alpha: -0.5 } },
}));
test('add_backward acc', () => check('add_backward acc', {
  tol: TOL.elementwise,
  tensors: { dy: { shape: [7, 41], init: 'normal' }, da: { shape: [7, 41], init: 'normal' }, db: { shape: [7, 41], init: 'normal' } },
  op: { op: 'add_backward', inputs: ['dy'], outputs: ['da', 'db'], attrs: { acc0: 1, acc1: 0, alpha: 0.5 } },
}));
test('add_backward db absent', () => check('add_backward db absent', {
  tol: TOL.elementwise,
  tensors: { dy: { shape: [300], init: 'normal' }, da: { shape: [300], init: 'normal' }, db: { shape: [300], init: 'normal' } },
  op: { op: 'add_backward', inputs: ['dy'], outputs: ['da', null], attrs: { acc0: 0, alpha: 1 } },
  compareOutputs: ['da', 'db'],
}));

// ---- cross-entropy -----------------------------------------------------------------------------
test('cross_entropy', () => check('cross_entropy', {
  tol: TOL.reduction,
  tensors: { logits: { shape: [13, 37], init: (r) => r.normal() * 3 }, targets: { shape: [13], dtype: 'i32', init: tok(37) },
    loss: { shape: [1] }, lse: { shape: [13] } },
  op: { op: 'cross_entropy', inputs: ['logits', 'targets', null], outputs: ['loss', 'lse'] },
}));
test('cross_entropy mask', () => check('cross_entropy mask', {
  tol: TOL.reduction, seed: 5,
  tensors: { logits: { shape: [300, 256], init: (r) => r.normal() * 2 }, targets: { shape: [300], dtype: 'i32', init: tok(256) },
    mask: { shape: [300], init: (r) => (r.uniform() < 0.3 ? 0 : 1) }, loss: { shape: [1] }, lse: { shape: [300] } },
  op: { op: 'cross_entropy', inputs: ['logits', 'targets', 'mask'], outputs: ['loss', 'lse'] },
}));
test('cross_entropy_backward', async () => {
  const r = rng(9);
  const M = 13, V = 37;
  const logits = Array.from({ length: M * V }, () => Math.fround(r.normal() * 3));
  const lse = [];
  for (let i = 0; i < M; i++) {
    const row = logits.slice(i * V, (i + 1) * V);
    const m = Math.max(...row);
    lse.push(m + Math.log(row.reduce((a, z) => a + Math.exp(z - m), 0)));
  }
  await check('cross_entropy_backward', {
    tol: TOL.transcendental,
    tensors: { logits: { shape: [M, V], init: logits }, targets: { shape: [M], dtype: 'i32', init: tok(V) }, lse: { shape: [M], init: lse },
      dlogits: { shape: [M, V], init: 'normal' } },
    op: { op: 'cross_entropy_backward', inputs: ['logits', 'targets', 'lse', null], outputs: ['dlogits'], attrs: { acc0: 0 } },
  });
});
test('cross_entropy_backward mask, no lse, acc', () => check('cross_entropy_backward mask no lse acc', {
  tol: TOL.transcendental, seed: 11,
  tensors: { logits: { shape: [70, 100], init: (r) => r.normal() * 3 }, targets: { shape: [70], dtype: 'i32', init: tok(100) },
    mask: { shape: [70], init: (r) => (r.uniform() < 0.4 ? 0 : 0.5 + r.uniform()) }, dlogits: { shape: [70, 100], init: 'normal' } },
  op: { op: 'cross_entropy_backward', inputs: ['logits', 'targets', null, 'mask'], outputs: ['dlogits'], attrs: { acc0: 1 } },
}));

// ---- grad_norm, adamw --------------------------------------------------------------------------
test('grad_norm', () => check('grad_norm', {
  tol: TOL.optimizer,
  tensors: { g0: { shape: [5], init: 'normal' }, g1: { shape: [3, 1000], init: 'normal', scale: 0.01 }, g2: { shape: [77], init: 'normal' },
    g3: { shape: [4097], init: 'normal' }, norm: { shape: [1] } },
  op: { op: 'grad_norm', inputs: ['g0', 'g1', 'g2', 'g3'], outputs: ['norm'] },
}));
for (const [normv, wd, step] of [[3.5, 0.1, 1], [0.2, 0.0, 7], [25, 0.1, 1000]]) {
  const name = `adamw norm=${normv} wd=${wd} step=${step}`;
  test(name, () => check(name, {
    tol: TOL.optimizer, seed: step,
    tensors: { p: { shape: [1001], init: 'normal' }, g: { shape: [1001], init: 'normal', scale: 0.1 },
      m: { shape: [1001], init: 'normal', scale: 0.01 }, v: { shape: [1001], init: 'positive' },
      norm: { shape: [1], init: [normv] }, 'optim.hparams': { shape: [2], kind: 'input', init: [3e-4, step] } },
    op: { op: 'adamw', inputs: ['p', 'g', 'm', 'v', 'norm', 'optim.hparams'], outputs: ['p', 'm', 'v'],
      attrs: { beta1: 0.9, beta2: 0.95, eps: 1e-8, weight_decay: wd, max_norm: 1.0 } },
  }));
}

after(() => {
  const kernels = [...new Set(results.map((r) => r.kernel))];
  const summary = {
    cases_passed: results.filter((r) => r.passed).length,
    cases_total: results.length,
    kernels_total: kernels.length,
    kernels_passed: kernels.filter((k) => results.filter((r) => r.kernel === k).every((r) => r.passed)).length,
    results,
  };
  writeFileSync(join(OUT, 'kernels.json'), JSON.stringify(summary, null, 1));
  closeBackend();
});
