// The executor's own behaviour: safetensors round trip, AdamW scalars, clear errors for bad
// programs, bad inputs, WGSL compile errors, oversized tensors and a lost device; asynchronous
// readback that never blocks run().
import assert from 'node:assert/strict';
import { after, test } from 'node:test';

import {
  WebGPUBackend,
  WebGPUError,
  adamwConstants,
  asTyped,
  decodeSafeTensors,
  encodeSafeTensors,
  kernelsFromMap,
  withIncludes,
} from '../dist/index.js';
import { createNodeBackend, kernelsFromDir } from '../dist/node.js';
import { backend, closeBackend } from './helpers.mjs';

const tensor = (name, shape, dtype = 'f32', kind = 'activation') => ({ name, kind, dtype, shape, trainable: false });
const program = (tensors, ops) => ({ format: 'ptl-program', version: 1, name: 'test', tensors, ops });
const addProgram = (n = 10) =>
  program(
    [tensor('a', [n]), tensor('b', [n]), tensor('y', [n])],
    [{ op: 'add', inputs: [0, 1], outputs: [2], attrs: { alpha: 2 } }],
  );

test('safetensors: encode then decode gives the same tensors and metadata; bad files are refused', () => {
  const file = {
    metadata: { format: 'tinygpt', x: '{"a":1}' },
    tensors: [
      { name: 'w', dtype: 'F32', shape: [2, 3], data: Float32Array.of(1, 2, 3, 4, 5, 6.5) },
      { name: 'i', dtype: 'I32', shape: [], data: Int32Array.of(-7) },
    ],
  };
  const bytes = encodeSafeTensors(file);
  assert.equal(Number(new DataView(bytes.buffer).getBigUint64(0, true)) % 8, 0);
  const back = decodeSafeTensors(bytes);
  assert.deepEqual(back.metadata, file.metadata);
  assert.deepEqual(
    back.tensors.map((t) => [t.name, t.dtype, t.shape, [...t.data]]),
    file.tensors.map((t) => [t.name, t.dtype, t.shape, [...t.data]]),
  );
  assert.throws(
    () => decodeSafeTensors(bytes.subarray(0, bytes.length - 4), 'x.tinygpt'),
    /x\.tinygpt: .*(offsets|trailing|outside)/,
  );
  assert.throws(() => decodeSafeTensors(new Uint8Array(4)), /too short/);
});

test('AdamW scalars follow adamw.cpp (as_typed: the shortest decimal of the float)', () => {
  assert.equal(asTyped(Math.fround(0.9)), 0.9);
  assert.equal(asTyped(Math.fround(3e-4)), 3e-4);
  const [decay, omb1, b2, omb2, negStep, bc2sqrt] = adamwConstants(1e-3, 1, {
    beta1: 0.9,
    beta2: 0.95,
    weight_decay: 0.1,
  });
  assert.equal(Math.fround(decay), Math.fround(1 - 1e-3 * 0.1));
  assert.equal(Math.fround(omb1), Math.fround(0.1));
  assert.equal(b2, 0.95);
  assert.equal(Math.fround(omb2), Math.fround(1 - 0.95));
  assert.equal(Math.fround(negStep), Math.fround(-1e-3 / (1 - 0.9)));
  assert.equal(Math.fround(bc2sqrt), Math.fround(Math.sqrt(1 - 0.95)));
});

test('run() returns at once; the readback promise resolves later with the values', async () => {
  const { backend: be } = await backend();
  const ex = await be.load(addProgram(1000));
  ex.setInput(
    'a',
    Float32Array.from({ length: 1000 }, (_, i) => i),
  );
  ex.setInput('b', new Float32Array(1000).fill(0.25));
  const p = ex.run(['y']);
  assert.ok(p instanceof Promise);
  const y = (await p).get('y');
  assert.equal(y[999], 999.5);
  assert.equal(ex.run(), null); // no readback asked: nothing to wait for
  ex.destroy();
});

test('bad programs and inputs give clear errors', async () => {
  const { backend: be } = await backend();
  await assert.rejects(be.load({ ...addProgram(), format: 'nope' }), /not a serialised program/);
  await assert.rejects(
    be.load(program([tensor('a', [2])], [{ op: 'frobnicate', inputs: [0], outputs: [0], attrs: {} }])),
    /unknown op 'frobnicate'/,
  );
  await assert.rejects(
    be.load(program([tensor('a', [2])], [{ op: 'add', inputs: [0, 5], outputs: [0], attrs: {} }])),
    /refers to tensor id 5/,
  );
  // An op writing a tensor it also reads cannot be bound in one WebGPU dispatch.
  await assert.rejects(
    be.load(program([tensor('a', [4]), tensor('b', [4])], [{ op: 'add', inputs: [0, 1], outputs: [0], attrs: {} }])),
    /tensor 'a' is both written and bound again/,
  );
  // Token ids are checked when uploaded.
  const emb = program(
    [
      tensor('tokens', [1, 3], 'i32', 'input'),
      tensor('tok_emb', [5, 4]),
      tensor('pos_emb', [3, 4]),
      tensor('x', [1, 3, 4]),
    ],
    [{ op: 'embedding', inputs: [0, 1, 2, -1], outputs: [3], attrs: {} }],
  );
  const ex = await be.load(emb);
  assert.throws(
    () => ex.setInput('tokens', [1, 7, 2]),
    (e) => e instanceof WebGPUError && /id 7 at index 1 is outside the vocabulary \[0, 5\)/.test(e.message),
  );
  assert.throws(() => ex.setInput('tokens', [1, 2]), /needs 3 values, got 2/);
  assert.throws(() => ex.setInput('nope', [1]), /has no tensor 'nope'/);
  ex.destroy();
  // KV-cache ops: pos0 is required, and checked on the host against the cache when uploaded.
  const kv = (pos0) =>
    program(
      [
        tensor('k', [1, 2, 4]),
        tensor('v', [1, 2, 4]),
        tensor('pos0', [1], 'i32', 'input'),
        tensor('cache.k.t', [8, 4], 'f32', 'state'),
        tensor('cache.v.t', [8, 4], 'f32', 'state'),
      ],
      [{ op: 'kv_cache_write', inputs: [0, 1, pos0], outputs: [3, 4], attrs: {} }],
    );
  await assert.rejects(be.load(kv(-1)), /op 0 kv_cache_write: missing pos0/);
  const kex = await be.load(kv(2));
  kex.setInput('pos0', [6]); // rows 6, 7: the last two
  assert.throws(
    () => kex.setInput('pos0', [7]),
    (e) => e instanceof WebGPUError && /pos0 = 7: rows 7 .. 8 are outside the KV cache of 8 rows/.test(e.message),
  );
  assert.throws(() => kex.setInput('pos0', [-1]), /outside the KV cache/);
  kex.destroy();
});

test('a program with tensors larger than the device can bind is refused before any buffer, naming the largest and the limit', async () => {
  const { backend: be, device } = await backend();
  const n = Math.floor(Math.min(device.limits.maxStorageBufferBindingSize, device.limits.maxBufferSize) / 4) + 16;
  const made = [];
  const create = device.createBuffer.bind(device);
  device.createBuffer = (d) => (made.push(d.label), create(d));
  try {
    await assert.rejects(
      be.load(
        program(
          [tensor('small', [8]), tensor('huge', [n + 8]), tensor('y', [n])],
          [
            { op: 'gelu', inputs: [0], outputs: [0], attrs: {} },
            { op: 'gelu', inputs: [1], outputs: [2], attrs: {} },
          ],
        ),
      ),
      new RegExp(
        `program 'test' does not fit this WebGPU device: tensor 'huge' needs ${(n + 8) * 4} bytes, more than this ` +
          'device can bind \\(maxStorageBufferBindingSize \\d+, maxBufferSize \\d+\\), and 1 more tensor is too large',
      ),
    );
  } finally {
    device.createBuffer = create;
  }
  assert.deepEqual(made, [], 'no buffer was created');
});

test('a WGSL compile error names the kernel file and the line', async () => {
  const { device } = await backend();
  const files = kernelsFromDir();
  const broken = new WebGPUBackend(device, (name) =>
    name === 'add' ? files(name).replace('a[i] + U.alpha', 'a[i] + U.nope') : files(name),
  );
  await assert.rejects(
    broken.load(addProgram()),
    (e) =>
      e instanceof WebGPUError && /WGSL compile error in kernels\/add\.wgsl/.test(e.message) && /nope/.test(e.message),
  );
});

test('kernel sources from a map of files (as a bundler gives them) resolve by path, includes too', async () => {
  const { device } = await backend();
  const files = kernelsFromDir();
  // Keys as Vite's import.meta.glob writes them; only the part after kernels/ matters.
  const record = {};
  for (const n of ['add', 'gelu', 'common/erf', 'common/reduce', 'layernorm'])
    record[`../../webgpu/kernels/${n}.wgsl`] = files(n);
  const fromMap = kernelsFromMap(record);
  assert.equal(fromMap('gelu'), files('gelu'));
  assert.equal(fromMap('common/erf'), files('common/erf'));
  assert.throws(() => fromMap('attention'), /no kernel file 'attention.wgsl' among the 5 given/);
  // gelu says `// #include erf`: the expanded source carries erf_f32 exactly once, after the kernel.
  const gelu = withIncludes('gelu', fromMap);
  assert.equal(gelu.match(/fn erf_f32/g).length, 1);
  assert.ok(gelu.startsWith(files('gelu')));
  assert.throws(
    () => withIncludes('gelu', kernelsFromMap({ 'kernels/gelu.wgsl': files('gelu') })),
    /kernels\/gelu.wgsl includes erf: no kernel file 'common\/erf.wgsl'/,
  );
  // A backend over the map runs a program (gelu, with its include) like one over the folder.
  const be = new WebGPUBackend(device, fromMap);
  const ex = await be.load(
    program([tensor('x', [5]), tensor('y', [5])], [{ op: 'gelu', inputs: [0], outputs: [1], attrs: {} }]),
  );
  ex.write('x', Float32Array.from([-2, -0.5, 0, 0.5, 2]));
  ex.run();
  const y = await ex.read('y');
  assert.ok(Math.abs(y[4] - 1.9544997) < 1e-6 && y[2] === 0, `gelu: ${y}`);
  ex.destroy();
});

test('a lost device turns into an exception at the next call', async () => {
  const other = await createNodeBackend();
  const ex = await other.backend.load(addProgram());
  other.device.destroy();
  await other.device.lost;
  assert.throws(
    () => ex.run(),
    (e) => e instanceof WebGPUError && /destroyed|lost/.test(e.message),
  );
});

after(() => closeBackend());
