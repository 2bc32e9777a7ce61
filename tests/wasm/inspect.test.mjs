// What the playground and the WebGPU backend need from the engine: training batches for an
// external executor (nextBatch, lrAt), inspection (inspect: top next bytes and attention maps),
// and one serialised program run once on the CPU backend (LoadedModule.runProgram), each
// checked against native ptl / ptl_program_run.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { Worker } from 'node:worker_threads';

import {
  BUILD_DIR,
  Engine,
  EngineClient,
  EngineError,
  ROOT,
  dataFile,
  encodeSafetensors,
  f32,
  load,
  maxAbsDiff,
  nativeProgramRun as nativeProgramRunIn,
  nativeSmallRun,
  needsNative,
  parseSafetensors,
  ptl,
  tmpDir,
  VARIANT,
} from './helpers.mjs';

let module, dir;
before(async () => {
  module = await load();
  dir = tmpDir();
});
after(() => {
  module?.terminate();
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

const nativeProgramRun = (program, inputs, name) => nativeProgramRunIn(dir, program, inputs, name);

test(`${VARIANT}: nextBatch gives the batches and learning rates of training, and counts the steps`, async () => {
  const corpus = fs.readFileSync(dataFile()).subarray(0, 100000);
  const config = { preset: 'tiny', train: { steps: 40, seed: 5, batch: 4 } };
  const trained = await Engine.create(config, module);
  const external = await Engine.create(config, module);
  try {
    await trained.setCorpus(corpus);
    await external.setCorpus(corpus);
    const metrics = await trained.train(3);
    const text = corpus.toString('latin1');
    for (let i = 0; i < 3; i++) {
      const b = await external.nextBatch();
      assert.equal(b.step, i + 1);
      assert.equal(b.lr, metrics[i].lr);
      assert.equal(b.batch, 4);
      assert.equal(b.seq, 32);
      assert.equal(b.tokens.length, 4 * 32);
      assert.equal(b.targets.length, 4 * 32);
      for (let r = 0; r < 4; r++) {
        const row = b.tokens.subarray(r * 32, (r + 1) * 32),
          tgt = b.targets.subarray(r * 32, (r + 1) * 32);
        for (let t = 0; t + 1 < 32; t++) assert.equal(tgt[t], row[t + 1]); // targets: the next byte
        // Each row is a window of the corpus.
        const window = String.fromCharCode(...row, tgt[31]);
        assert.ok(text.includes(window), `row ${r} of step ${i + 1} is not in the training text`);
      }
    }
    assert.equal(external.lrAt(0), metrics[0].lr);
    assert.equal(external.lrAt(2), metrics[2].lr);
    // The same data order, step and tokens as three training steps: the checkpoints' train_state agree.
    const a = JSON.parse(parseSafetensors(await trained.exportCheckpoint()).metadata.train_state);
    const b = JSON.parse(parseSafetensors(await external.exportCheckpoint()).metadata.train_state);
    assert.equal(b.data_rng, a.data_rng);
    assert.equal(b.step, 3);
    assert.equal(b.tokens_seen, a.tokens_seen);
    // And training continues on the same batch: step 4 has the same loss on the same weights.
    await external.importCheckpoint(await trained.exportCheckpoint());
    const [m4] = await external.train(1);
    const [t4] = await trained.train(1);
    assert.equal(m4.loss, t4.loss);
    assert.throws(
      () => external.lrAt(-1),
      (e) => e instanceof EngineError && /non-negative/.test(e.message),
    );
  } finally {
    trained.dispose();
    external.dispose();
  }
  const empty = await Engine.create(config, module);
  try {
    await assert.rejects(empty.nextBatch(), (e) => e instanceof EngineError && /no corpus/.test(e.message));
  } finally {
    empty.dispose();
  }
});

test(
  `${VARIANT}: inspect gives causal attention maps and the top next bytes, equal to native`,
  needsNative,
  async () => {
    const run = nativeSmallRun();
    const ckptPath = path.join(run, 'model.tinygpt');
    const ckpt = fs.readFileSync(ckptPath);
    const engine = await Engine.fromCheckpoint(ckpt, module);
    try {
      const prompt = 'ROMEO:\nWhat say you, my lord?';
      const r = await engine.inspect(prompt, { topK: 10 });
      const T = prompt.length;
      assert.equal(r.T, T);
      assert.deepEqual([...r.tokens], [...Buffer.from(prompt)]);
      assert.equal(r.layers, 3);
      assert.equal(r.heads, 3);
      assert.equal(r.attention.length, 3 * 3 * T * T);
      for (let l = 0; l < r.layers; l++)
        for (let h = 0; h < r.heads; h++) {
          const m = r.maps[l][h];
          assert.equal(m.length, T * T);
          for (let i = 0; i < T; i++) {
            let sum = 0;
            for (let j = 0; j < T; j++) {
              if (j > i) assert.equal(m[i * T + j], 0, `layer ${l} head ${h}: position ${i} sees ${j}`);
              sum += m[i * T + j];
            }
            assert.ok(Math.abs(sum - 1) < 1e-5, `row ${i} sums to ${sum}`);
          }
        }
      assert.equal(r.top.length, 10);
      for (let i = 1; i < 10; i++) assert.ok(r.top[i - 1].prob >= r.top[i].prob);

      // Native: the inspect program of this length (ptl program) run by ptl_program_run on the
      // checkpoint's weights and the prompt.
      const program = ptl(['program', '--program', 'inspect', '--seq', String(T), ckptPath]);
      const weights = parseSafetensors(ckpt);
      const inputs = { tokens: { dtype: 'I32', shape: [1, T], data: Int32Array.from(Buffer.from(prompt)) } };
      for (const [name, t] of weights.tensors)
        if (!name.startsWith('optim.')) inputs[name] = { dtype: t.dtype, shape: t.shape, data: f32(t) };
      const inBytes = encodeSafetensors(inputs);
      const native = parseSafetensors(nativeProgramRun(program, inBytes, 'inspect'));
      for (let l = 0; l < 3; l++) {
        const probs = f32(native.tensors.get(`blocks.${l}.attn.probs`));
        const d = maxAbsDiff(r.attention.subarray(l * 3 * T * T, (l + 1) * 3 * T * T), probs);
        assert.ok(d <= 1e-6, `layer ${l}: attention differs from native by ${d}`);
      }
      const logits = f32(native.tensors.get('logits')).subarray((T - 1) * 256, T * 256);
      const mx = Math.max(...logits);
      const e = Array.from(logits, (x) => Math.exp(x - mx));
      const total = e.reduce((a, b) => a + b, 0);
      const order = e
        .map((x, v) => [x / total, v])
        .sort((a, b) => b[0] - a[0] || a[1] - b[1])
        .slice(0, 10);
      assert.deepEqual(
        r.top.map((t) => t.byte),
        order.map((o) => o[1]),
      );
      for (let i = 0; i < 10; i++)
        assert.ok(Math.abs(r.top[i].prob - order[i][0]) < 1e-6, `rank ${i}: ${r.top[i].prob} vs ${order[i][0]}`);

      // The same program through the wasm one-program runner gives the maps inspect gave, bitwise.
      const wasm = parseSafetensors(await module.runProgram(program, inBytes));
      for (let l = 0; l < 3; l++)
        assert.equal(
          maxAbsDiff(
            r.attention.subarray(l * 3 * T * T, (l + 1) * 3 * T * T),
            f32(wasm.tensors.get(`blocks.${l}.attn.probs`)),
          ),
          0,
        );

      // Past the context the prompt is cropped to its last ctx bytes; an empty one is a newline.
      // The heap was reserved for inspection at the full context when the model was loaded.
      const heap = module.heapBytes();
      const long = 'x'.repeat(30) + prompt + prompt + prompt;
      const rl = await engine.inspect(long, { topK: 3 });
      assert.equal(module.heapBytes(), heap, 'the heap grew for an inspection at the full context');
      assert.equal(rl.T, 64);
      assert.deepEqual([...rl.tokens], [...Buffer.from(long.slice(-64))]);
      assert.equal(rl.top.length, 3);
      const re = await engine.inspect('');
      assert.deepEqual([...re.tokens], [10]);
      await assert.rejects(
        engine.inspect('a', { topK: 0 }),
        (e) => e instanceof EngineError && /top k/.test(e.message),
      );
      const exported = await engine.exportProgram('inspect');
      assert.equal(exported.name, 'inspect');
      assert.ok(JSON.stringify(exported.ops).includes('attention_probs'));
    } finally {
      engine.dispose();
    }
  },
);

test(`${VARIANT}: runProgram runs one linear op as ptl_program_run kernel does`, needsNative, async () => {
  const M = 5,
    K = 24,
    N = 7;
  const program = {
    format: 'ptl-program',
    version: 1,
    name: 'kernel',
    tensors: [
      { name: 'x', kind: 'input', dtype: 'f32', shape: [M, K], trainable: false },
      { name: 'W', kind: 'input', dtype: 'f32', shape: [N, K], trainable: false },
      { name: 'b', kind: 'input', dtype: 'f32', shape: [N], trainable: false },
      { name: 'y', kind: 'activation', dtype: 'f32', shape: [M, N], trainable: false },
    ],
    ops: [{ op: 'linear', inputs: [0, 1, 2], outputs: [3], attrs: {} }],
  };
  let seed = 1;
  const rand = (n) =>
    Float32Array.from({ length: n }, () => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648) * 2 - 1);
  const x = rand(M * K),
    W = rand(N * K),
    b = rand(N);
  const inputs = encodeSafetensors({
    x: { dtype: 'F32', shape: [M, K], data: x },
    W: { dtype: 'F32', shape: [N, K], data: W },
    b: { dtype: 'F32', shape: [N], data: b },
  });
  const wasm = parseSafetensors(await module.runProgram(program, inputs));
  const native = parseSafetensors(nativeProgramRun(program, inputs, 'linear'));
  assert.deepEqual([...wasm.tensors.keys()].sort(), ['W', 'b', 'x', 'y']);
  const y = f32(wasm.tensors.get('y'));
  assert.ok(maxAbsDiff(y, f32(native.tensors.get('y'))) <= 1e-6);
  for (let i = 0; i < M; i++)
    for (let n = 0; n < N; n++) {
      let s = b[n];
      for (let k = 0; k < K; k++) s += x[i * K + k] * W[n * K + k];
      assert.ok(Math.abs(y[i * N + n] - s) < 1e-5);
    }
  // Errors carry the engine's message; the module stays usable.
  await assert.rejects(
    module.runProgram('{', inputs),
    (e) => e instanceof EngineError && /invalid JSON/.test(e.message),
  );
  const extra = encodeSafetensors({ q: { dtype: 'F32', shape: [1], data: new Float32Array(1) } });
  await assert.rejects(
    module.runProgram(program, extra),
    (e) => e instanceof EngineError && /'q' is not in the program/.test(e.message),
  );
  await assert.rejects(
    module.runProgram(program, new Uint8Array(3)),
    (e) => e instanceof EngineError && e.call === 'ptl_run_program',
  );
  assert.equal(maxAbsDiff(f32(parseSafetensors(await module.runProgram(program, inputs)).tensors.get('y')), y), 0);
});

test(`${VARIANT}: the worker serves nextBatch, inspect and runProgram`, async () => {
  const w = new Worker(path.join(ROOT, 'tests', 'wasm', 'worker-host.mjs'));
  const port = {
    postMessage: (m, t) => w.postMessage(m, t),
    addEventListener: (_type, l) => w.on('message', (data) => l({ data })),
  };
  const client = new EngineClient(port);
  try {
    await client.call('load', { buildDir: BUILD_DIR, variant: VARIANT });
    const program = JSON.stringify({
      format: 'ptl-program',
      version: 1,
      name: 'kernel',
      tensors: [
        { name: 'x', kind: 'input', dtype: 'f32', shape: [4], trainable: false },
        { name: 'y', kind: 'activation', dtype: 'f32', shape: [4], trainable: false },
      ],
      ops: [{ op: 'gelu', inputs: [0], outputs: [1], attrs: {} }],
    });
    const out = await client.call('runProgram', {
      program,
      inputs: encodeSafetensors({ x: { dtype: 'F32', shape: [4], data: Float32Array.of(-1, 0, 1, 2) } }),
    });
    const y = f32(parseSafetensors(out).tensors.get('y'));
    assert.ok(Math.abs(y[2] - 0.8413447) < 1e-6 && y[1] === 0);
    await client.call('create', { config: { preset: 'tiny', train: { batch: 2 } } });
    await client.call('setCorpus', { corpus: fs.readFileSync(dataFile()).subarray(0, 50000) });
    const b = await client.call('nextBatch', {});
    assert.ok(b.tokens instanceof Int32Array && b.tokens.length === 64 && b.step === 1 && b.lr > 0);
    const r = await client.call('inspect', { prompt: 'Hello', topK: 4 });
    assert.ok(r.attention instanceof Float32Array && r.attention.length === 2 * 3 * 5 * 5);
    assert.ok(r.maps[1][2] instanceof Float32Array && r.maps[1][2].length === 25);
    assert.equal(r.maps[1][2][0], 1); // position 0 sees only itself
    assert.equal(r.top.length, 4);
  } finally {
    await w.terminate();
  }
});
