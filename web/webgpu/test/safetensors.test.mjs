// The TypeScript safetensors reader on half-precision checkpoints: F16 and BF16 tensors are
// widened to F32 exactly (known bit patterns, infinities, NaN, signed zero, subnormals), and on a
// file written by `ptl export --dtype f16|bf16` the widened weights are bitwise the engine's own
// (the engine re-exporting the half file as F32) and within half a 16-bit step of the F32 weights.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';

import { decodeSafeTensors } from '../dist/index.js';
import { run, tool } from './helpers.mjs';

const dir = mkdtempSync(join(tmpdir(), 'ptl-half-'));
after(() => rmSync(dir, { recursive: true, force: true }));

// A safetensors file of one tensor of 16-bit elements given as bit patterns.
function halfFile(dtype, bits) {
  const header = JSON.stringify({ w: { dtype, shape: [bits.length], data_offsets: [0, 2 * bits.length] } });
  const padded = header + ' '.repeat((8 - ((8 + header.length) % 8)) % 8);
  const out = new Uint8Array(8 + padded.length + 2 * bits.length);
  const view = new DataView(out.buffer);
  view.setBigUint64(0, BigInt(padded.length), true);
  out.set(new TextEncoder().encode(padded), 8);
  bits.forEach((b, i) => view.setUint16(8 + padded.length + 2 * i, b, true));
  return out;
}

const same = (a, b) => Object.is(a, b) || (Number.isNaN(a) && Number.isNaN(b));

test('F16 and BF16 bit patterns widen to the exact F32 values', () => {
  const f16 = [
    [0x3c00, 1],
    [0xc000, -2],
    [0x3555, 0.333251953125],
    [0x7bff, 65504],
    [0x0400, 2 ** -14],
    [0x0001, 2 ** -24],
    [0x83ff, -1023 * 2 ** -24],
    [0x0000, 0],
    [0x8000, -0],
    [0x7c00, Infinity],
    [0xfc00, -Infinity],
    [0x7e00, NaN],
    [0x7c01, NaN],
  ];
  const bf16 = [
    [0x3f80, 1],
    [0xc0a0, -5],
    [0x3eab, 0.333984375],
    [0x7f7f, 3.3895313892515355e38],
    [0x0001, 2 ** -133], // an F32 subnormal
    [0x8000, -0],
    [0x7f80, Infinity],
    [0xff80, -Infinity],
    [0x7fc0, NaN],
  ];
  for (const [dtype, cases] of [
    ['F16', f16],
    ['BF16', bf16],
  ]) {
    const t = decodeSafeTensors(
      halfFile(
        dtype,
        cases.map(([b]) => b),
      ),
    ).tensors[0];
    assert.equal(t.dtype, 'F32');
    assert.ok(t.data instanceof Float32Array);
    cases.forEach(([b, v], i) =>
      assert.ok(same(t.data[i], v), `${dtype} 0x${b.toString(16)}: got ${t.data[i]}, want ${v}`),
    );
  }
  // Every finite F16: widening is monotonic over the positive patterns (no pattern misplaced).
  const all = decodeSafeTensors(
    halfFile(
      'F16',
      Array.from({ length: 0x7c00 }, (_, i) => i),
    ),
  ).tensors[0].data;
  for (let i = 1; i < all.length; ++i) assert.ok(all[i] > all[i - 1], `0x${i.toString(16)}`);
});

test('a half tensor with the wrong byte count or an unknown dtype is refused, naming tensor and dtype', () => {
  const f = halfFile('F16', [1, 2, 3, 4]);
  const bad = new Uint8Array(f);
  const text = new TextDecoder().decode(bad.subarray(8, 8 + 64));
  const at = 8 + text.indexOf('F16');
  bad.set(new TextEncoder().encode('F64'), at);
  assert.throws(() => decodeSafeTensors(bad, 'x.tinygpt'), /x\.tinygpt: tensor 'w' has dtype F64; only F32, F16, BF16/);
  const long = new Uint8Array(f);
  long.set(new TextEncoder().encode('F32'), at);
  assert.throws(() => decodeSafeTensors(long, 'x.tinygpt'), /tensor 'w' has 8 bytes but F32 x its shape needs 16/);
});

test('weights exported by ptl as F16 and BF16 widen to the engine values', () => {
  let text = '';
  const words = ['the ', 'king ', 'and ', 'queen ', 'of ', 'a ', 'house ', 'shall ', 'speak ', '\n'];
  for (let i = 0; text.length < 8000; ++i) text += words[(i * 7 + (i >> 3)) % words.length];
  writeFileSync(join(dir, 't.txt'), text);
  const ptl = (...args) => run(tool('ptl'), args, { cwd: dir });
  ptl('train', '--preset', 'tiny', '--data', 't.txt', '--steps', '5', '--sample-every', '0', '--out', 'run');
  ptl('export', 'run/model.tinygpt', '--out', 'w32.tinygpt');
  const read = (f) => decodeSafeTensors(new Uint8Array(readFileSync(join(dir, f))), f);
  const wide = read('w32.tinygpt');
  for (const [dtype, flag, bits] of [
    ['F16', 'f16', 11],
    ['BF16', 'bf16', 8],
  ]) {
    ptl('export', 'run/model.tinygpt', '--out', `${flag}.tinygpt`, '--dtype', flag);
    // The engine's widening of the same file: exported again as F32.
    ptl('export', `${flag}.tinygpt`, '--out', `${flag}-engine.tinygpt`);
    const raw = readFileSync(join(dir, `${flag}.tinygpt`));
    const n = Number(raw.readBigUInt64LE(0));
    const header = JSON.parse(raw.subarray(8, 8 + n).toString('utf8'));
    assert.deepEqual(
      new Set(
        Object.entries(header)
          .filter(([k]) => k !== '__metadata__')
          .map(([, t]) => t.dtype),
      ),
      new Set([dtype]),
    );
    const half = read(`${flag}.tinygpt`);
    const engine = read(`${flag}-engine.tinygpt`);
    assert.deepEqual(half.metadata, wide.metadata);
    assert.equal(half.tensors.length, wide.tensors.length);
    let changed = 0;
    for (const t of half.tensors) {
      assert.equal(t.dtype, 'F32', t.name);
      const w = wide.tensors.find((x) => x.name === t.name).data;
      const e = engine.tensors.find((x) => x.name === t.name).data;
      assert.deepEqual(
        new Uint32Array(t.data.buffer, t.data.byteOffset, t.data.length),
        new Uint32Array(e.buffer, e.byteOffset, e.length),
        `${dtype} ${t.name}: the TypeScript reader and the engine disagree`,
      );
      for (let i = 0; i < t.data.length; ++i) {
        // Half a step of a `bits`-bit significand at w's magnitude (F16 subnormals: 2^-25).
        const exp = Math.max(Math.floor(Math.log2(Math.abs(w[i]) || 2 ** -30)), dtype === 'F16' ? -14 : -126);
        const halfStep = 2 ** (exp - bits);
        assert.ok(Math.abs(t.data[i] - w[i]) <= halfStep, `${dtype} ${t.name}[${i}]: ${t.data[i]} from ${w[i]}`);
        changed += t.data[i] !== w[i];
      }
    }
    assert.ok(changed > 0, `${dtype}: no weight was rounded (the comparison would prove nothing)`);
  }
});
