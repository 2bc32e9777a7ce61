// Dropout on WebGPU against a plain JavaScript reference of the rule in docs/model.md "Dropout"
// (written here from the rule, independent of the kernels): the generator's test vector, the
// dropout / dropout_backward ops, and attention with dropout on its probabilities (forward and
// backward, the mask regenerated in the backward). Needs no native build.
import assert from 'node:assert/strict';
import { after, test } from 'node:test';

import { dropoutKey } from '../dist/index.js';
import { backend, closeBackend, compare, rng } from './helpers.mjs';

// ---- the reference --------------------------------------------------------------------------

const h = (x0) => {
  let x = x0 >>> 0;
  x ^= x >>> 16;
  x = Math.imul(x, 0x7feb352d) >>> 0;
  x ^= x >>> 15;
  x = Math.imul(x, 0x846ca68b) >>> 0;
  x ^= x >>> 16;
  return x >>> 0;
};
const fnv1a = (name) => {
  let x = 2166136261;
  for (const b of new TextEncoder().encode(name)) x = Math.imul(x ^ b, 16777619) >>> 0;
  return x >>> 0;
};
const baseOf = (stream, key, step) => h((h((h(stream) ^ step) >>> 0) ^ key) >>> 0);
const rOf = (base, index) => h((base ^ h(index)) >>> 0);
const thresholdOf = (p) => Math.floor(p * 16777216 + 0.5);
const attrsOf = (p, name) => ({ p, threshold: thresholdOf(p), scale: Math.fround(1 / (1 - p)), stream: fnv1a(name) });
const keepOf = (a, key, step) => {
  const base = baseOf(a.stream, key, step);
  return (index) => rOf(base, index) >>> 8 >= a.threshold;
};

// ---- the test vector (the C++ engine and python_ref print the same numbers) -----------------

// key = 1, step = 1, stream = FNV-1a("emb.drop"): base and r(0 .. 7).
const VECTOR = {
  stream: 1846227114, // 0x6e0b30aa
  base: 2357755379, // 0x8c887df3
  r: [784773218, 1492460522, 3542620566, 2327172700, 854294220, 2181077796, 1945830051, 3463008827],
};

test('generator test vector: key 1, step 1, stream "emb.drop"', (t) => {
  const stream = fnv1a('emb.drop');
  const base = baseOf(stream, 1, 1);
  const r = VECTOR.r.map((_, i) => rOf(base, i));
  t.diagnostic(`stream ${stream} base ${base} r ${r.join(', ')}`);
  assert.equal(stream, VECTOR.stream);
  assert.equal(base, VECTOR.base);
  assert.deepEqual(r, VECTOR.r);
  assert.equal(thresholdOf(0.1), 1677722);
  // The engine's known answers (tests/test_dropout.cpp): h(1), key 1337's base, 16 mask bits.
  assert.equal(h(1), 0x688990c0);
  const b1337 = baseOf(stream, 1337, 1);
  assert.equal(b1337, 0x01a2d92f);
  const keep = keepOf({ threshold: thresholdOf(0.1), stream }, 1337, 1);
  assert.equal(Array.from({ length: 16 }, (_, i) => (keep(i) ? 1 : 0)).join(''), '1110111111100111');
  assert.equal(dropoutKey(1), 1);
  assert.equal(dropoutKey(0x1_0000_0005n), 4);
  assert.equal(dropoutKey(2 ** 52 + 7), (2 ** 20) ^ 7);
  assert.equal(dropoutKey(0xffff_ffff_ffff_ffffn), 0);
});

// ---- running one op on the GPU --------------------------------------------------------------

// A one-op program over named tensors ({name: [shape, dtype?]}), its inputs written, run once;
// returns the named outputs.
async function runOp(op, tensors, values, outputs, options) {
  const { backend: be0 } = await backend();
  const { WebGPUBackend } = await import('../dist/index.js');
  const be = options ? new WebGPUBackend(be0.device, be0.kernels, options) : be0;
  const names = Object.keys(tensors);
  const id = (n) => (n === null ? -1 : names.indexOf(n));
  const program = {
    format: 'ptl-program',
    version: 1,
    name: `dropout test ${op.op}`,
    tensors: names.map((n) => ({
      name: n,
      kind: n === 'dropout.seed' ? 'input' : 'activation',
      dtype: tensors[n][1] ?? 'f32',
      shape: tensors[n][0],
      trainable: false,
    })),
    ops: [{ op: op.op, inputs: op.inputs.map(id), outputs: op.outputs.map(id), attrs: op.attrs }],
  };
  const ex = await be.load(program);
  try {
    for (const [n, v] of Object.entries(values)) ex.write(n, v);
    ex.run();
    const out = {};
    for (const n of outputs) out[n] = await ex.read(n);
    return out;
  } finally {
    ex.destroy();
  }
}

const normals = (r, n) => Float32Array.from({ length: n }, () => r.normal());
const seedOf = (key, step) => Int32Array.of(key | 0, step | 0);

test('dropout and dropout_backward (acc) match the reference exactly', async () => {
  const n = 5000;
  const r = rng(7);
  const x = normals(r, n),
    dy = normals(r, n),
    dx0 = normals(r, n);
  // A key above 2^31 checks that dropout.seed's i32 is read as u32.
  const key = 0x9e3779b9,
    step = 12;
  for (const p of [0.1, 0.5]) {
    const a = attrsOf(p, 'blocks.3.mlp.drop');
    const keep = keepOf(a, key, step);
    const yRef = new Float32Array(n),
      dxRef = new Float32Array(n);
    let dropped = 0;
    for (let i = 0; i < n; i++) {
      const k = keep(i);
      if (!k) dropped++;
      yRef[i] = k ? Math.fround(x[i] * a.scale) : 0;
      dxRef[i] = Math.fround(dx0[i] + (k ? Math.fround(dy[i] * a.scale) : 0));
    }
    assert.ok(Math.abs(dropped / n - p) < 0.03, `dropped ${dropped} of ${n} at p = ${p}`);
    const f = await runOp(
      { op: 'dropout', inputs: ['x', 'dropout.seed'], outputs: ['y'], attrs: a },
      { x: [[n]], 'dropout.seed': [[2], 'i32'], y: [[n]] },
      { x, 'dropout.seed': seedOf(key, step) },
      ['y'],
    );
    assert.deepEqual(Array.from(f.y), Array.from(yRef), `dropout p = ${p}`);
    const b = await runOp(
      { op: 'dropout_backward', inputs: ['dy', 'dropout.seed'], outputs: ['dx'], attrs: { ...a, acc0: 1 } },
      { dy: [[n]], 'dropout.seed': [[2], 'i32'], dx: [[n]] },
      { dy, 'dropout.seed': seedOf(key, step), dx: dx0 },
      ['dx'],
    );
    assert.deepEqual(Array.from(b.dx), Array.from(dxRef), `dropout_backward p = ${p}`);
  }
  // Another step draws another mask.
  const a = attrsOf(0.5, 'emb.drop');
  const k1 = keepOf(a, 1, 1),
    k2 = keepOf(a, 1, 2);
  let same = 0;
  for (let i = 0; i < 1000; i++) if (k1(i) === k2(i)) same++;
  assert.ok(same < 600, `steps 1 and 2 agree on ${same} of 1000 elements`);
});

// Attention (causal, multi-head) with dropout on the probabilities, in double precision.
function attentionRef(B, T, C, H, q, k, v, dy, keep, dscale) {
  const HS = C / H;
  const scale = Math.fround(1 / Math.sqrt(HS));
  const y = new Float64Array(B * T * C),
    lse = new Float64Array(B * H * T);
  const dq = new Float64Array(B * T * C),
    dk = new Float64Array(B * T * C),
    dv = new Float64Array(B * T * C);
  const at = (b, t, h, c) => (b * T + t) * C + h * HS + c;
  const dot = (a, ia, bb, ib) => {
    let s = 0;
    for (let c = 0; c < HS; c++) s += a[ia + c] * bb[ib + c];
    return s;
  };
  let droppedProbs = 0;
  for (let b = 0; b < B; b++)
    for (let hd = 0; hd < H; hd++)
      for (let i = 0; i < T; i++) {
        const qi = at(b, i, hd, 0);
        const s = [];
        let mx = -Infinity;
        for (let j = 0; j <= i; j++) {
          s.push(dot(q, qi, k, at(b, j, hd, 0)) * scale);
          mx = Math.max(mx, s[j]);
        }
        let sum = 0;
        for (const x of s) sum += Math.exp(x - mx);
        const l = mx + Math.log(sum);
        lse[(b * H + hd) * T + i] = l;
        const P = s.map((x) => Math.exp(x - l));
        const d = P.map((_, j) => (keep(((b * H + hd) * T + i) * T + j) ? dscale : 0));
        droppedProbs += d.filter((x) => x === 0).length;
        for (let j = 0; j <= i; j++) for (let c = 0; c < HS; c++) y[qi + c] += d[j] * P[j] * v[at(b, j, hd, c)];
        // Backward (D_i from the dropped y).
        let D = 0;
        for (let c = 0; c < HS; c++) D += dy[qi + c] * y[qi + c];
        for (let j = 0; j <= i; j++) {
          const kj = at(b, j, hd, 0);
          const dP = dot(dy, qi, v, kj);
          const dS = P[j] * (d[j] * dP - D);
          for (let c = 0; c < HS; c++) {
            dq[qi + c] += dS * scale * k[kj + c];
            dk[kj + c] += dS * scale * q[qi + c];
            dv[kj + c] += d[j] * P[j] * dy[qi + c];
          }
        }
      }
  return { y, lse, dq, dk, dv, droppedProbs };
}

for (const [B, T, C, H, rows] of [
  [2, 7, 12, 3],
  [1, 70, 32, 2],
  [1, 70, 32, 2, 32],
  [2, 20, 96, 2],
]) {
  test(`attention with dropout B=${B} T=${T} C=${C} H=${H}${rows ? ` rows=${rows}` : ''}: forward and backward`, async () => {
    const r = rng(T * C + 3);
    const n = B * T * C;
    const q = normals(r, n),
      k = normals(r, n),
      v = normals(r, n),
      dy = normals(r, n);
    const a = attrsOf(0.2, 'blocks.1.attn.probs.drop');
    const key = 0x89abcdef,
      step = 5;
    const ref = attentionRef(B, T, C, H, q, k, v, dy, keepOf(a, key, step), a.scale);
    assert.ok(ref.droppedProbs > 0, 'the case drops some probabilities');
    const options = rows ? { attentionRows: rows } : undefined;
    const seed = seedOf(key, step);
    const shape = { q: [[B, T, C]], k: [[B, T, C]], v: [[B, T, C]], 'dropout.seed': [[2], 'i32'] };
    const f = await runOp(
      { op: 'attention', inputs: ['q', 'k', 'v', 'dropout.seed'], outputs: ['y', 'lse'], attrs: { heads: H, ...a } },
      { ...shape, y: [[B, T, C]], lse: [[B, H, T]] },
      { q, k, v, 'dropout.seed': seed },
      ['y', 'lse'],
      options,
    );
    const tol = { atol: 2e-5, rtol: 1e-4 };
    for (const [name, got, want] of [
      ['y', f.y, ref.y],
      ['lse', f.lse, ref.lse],
    ]) {
      const c = compare(got, want, tol.atol, tol.rtol);
      assert.ok(c.ok, `${name}: max abs ${c.maxAbs} at ${c.worst}: gpu ${got[c.worst]} ref ${want[c.worst]}`);
    }
    // The backward from the reference's forward (y, lse in fp32), dq / dk / dv accumulated into
    // nonzero contents.
    const y32 = Float32Array.from(ref.y),
      lse32 = Float32Array.from(ref.lse);
    const init = { dq: normals(r, n), dk: normals(r, n), dv: normals(r, n) };
    const bw = await runOp(
      {
        op: 'attention_backward',
        inputs: ['dy', 'q', 'k', 'v', 'y', 'lse', 'dropout.seed'],
        outputs: ['dq', 'dk', 'dv'],
        attrs: { heads: H, acc0: 1, acc1: 0, acc2: 1, ...a },
      },
      {
        ...shape,
        dy: [[B, T, C]],
        y: [[B, T, C]],
        lse: [[B, H, T]],
        dq: [[B, T, C]],
        dk: [[B, T, C]],
        dv: [[B, T, C]],
      },
      { q, k, v, dy, y: y32, lse: lse32, 'dropout.seed': seed, ...init },
      ['dq', 'dk', 'dv'],
      options,
    );
    const want = {
      dq: ref.dq.map((x, i) => x + init.dq[i]),
      dk: ref.dk,
      dv: ref.dv.map((x, i) => x + init.dv[i]),
    };
    for (const name of ['dq', 'dk', 'dv']) {
      const c = compare(bw[name], want[name], tol.atol, tol.rtol);
      assert.ok(
        c.ok,
        `${name}: max abs ${c.maxAbs} at ${c.worst}: gpu ${bw[name][c.worst]} ref ${want[name][c.worst]}`,
      );
    }
  });
}

test('an op with dropout but no dropout.seed is refused at load', async () => {
  await assert.rejects(
    runOp(
      { op: 'dropout', inputs: ['x', null], outputs: ['y'], attrs: attrsOf(0.1, 'emb.drop') },
      { x: [[4]], y: [[4]] },
      {},
      [],
    ),
    /missing dropout\.seed/,
  );
});

after(() => closeBackend());
