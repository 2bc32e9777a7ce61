// A random GPT-2 with GPT-2's real tokenizer (V = 50,257; tests/wasm/random-gpt2.mjs writes the
// Hugging Face folder, native `ptl import-hf` makes the checkpoint) in WebAssembly: the prompt
// encodes to gpt-3-encoder's ids, the logits on it are native's (1e-4), and 100 greedy tokens
// are native's, ids and text (`ptl sample`, ptl_program_run). python_ref makes the same model
// and checks it against native (tests/python/test_gpt2_tokenizer.py).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';

import {
  Engine,
  PROGRAM_RUN,
  encodeSafetensors,
  f32,
  load,
  maxAbsDiff,
  nativeProgramRun,
  needsNative,
  parseSafetensors,
  ptl,
  tmpDir,
  VARIANT,
} from './helpers.mjs';
import { GREEDY, PROMPT, gpt3Encoder, writeRandomGpt2 } from './random-gpt2.mjs';
import { execFileSync } from 'node:child_process';

const V = 50257;
let module, engine, dir, ckpt, promptIds;
before(async () => {
  module = await load();
  dir = tmpDir('ptl-wasm-gpt2-');
  ckpt = path.join(dir, 'gpt2.tinygpt');
  const out = ptl(['import-hf', writeRandomGpt2(path.join(dir, 'hf')), '--out', ckpt]);
  assert.match(out, /vocab 50257.*50257 ids, byte-level BPE, stored/);
  engine = await Engine.fromCheckpoint(new Uint8Array(fs.readFileSync(ckpt)), module, 'gpt2.tinygpt');
  fs.writeFileSync(path.join(dir, 'prompt.txt'), PROMPT);
  promptIds = JSON.parse(
    ptl(['tokenizer', 'encode', '--tokenizer', ckpt, '--data', path.join(dir, 'prompt.txt'), '--json']),
  ).ids;
});
after(() => {
  engine?.dispose();
  module?.terminate();
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

test(`${VARIANT}: the imported GPT-2 reads text in GPT-2's tokens (gpt-3-encoder's ids)`, async () => {
  const info = await engine.info();
  assert.equal(info.model.vocab_size, V);
  assert.equal(engine.tokenizerInfo().vocab_size, V);
  const ids = [...engine.encode(PROMPT)];
  assert.deepEqual(ids, gpt3Encoder.encode(PROMPT));
  assert.deepEqual(ids, promptIds, 'native ptl tokenizer encode');
  assert.ok(ids.length < PROMPT.length, 'merged tokens');
  assert.equal(engine.decodeText(ids), PROMPT);
});

test(`${VARIANT}: ${GREEDY} greedy tokens equal native ptl sample's, ids and text`, needsNative, async () => {
  const r = await engine.generate(PROMPT, { maxTokens: GREEDY, temperature: 0 });
  assert.equal(r.ids.length, GREEDY);
  // Native ids: the generation program with the KV cache (ptl_program_run model).
  const out = path.join(dir, 'greedy.json');
  const args = ['model', '--checkpoint', ckpt, '--tokens', promptIds.join(','), '--greedy', String(GREEDY)];
  execFileSync(PROGRAM_RUN, [...args, '--out', out], { stdio: ['ignore', 'pipe', 'pipe'] });
  const native = JSON.parse(fs.readFileSync(out, 'utf8'));
  assert.deepEqual([...r.ids], native.greedy);
  assert.ok(new Set(r.ids).size > 1, 'a continuation of one repeated token checks little');
  // Native text: ptl sample --raw prints the prompt, the continuation's bytes, a newline.
  const sample = ptl(
    ['sample', ckpt, '--prompt', PROMPT, '--temperature', '0', '--max-tokens', String(GREEDY), '--raw'],
    { encoding: 'buffer' },
  );
  assert.ok(sample.subarray(0, PROMPT.length).equals(Buffer.from(PROMPT)));
  const bytes = sample.subarray(PROMPT.length, sample.length - 1);
  assert.deepEqual(Buffer.from(r.tokens), bytes, 'the decoded bytes are ptl sample output');
  assert.equal(r.text, new TextDecoder().decode(bytes));
  assert.equal(gpt3Encoder.decode([...r.ids]), r.text, "gpt-3-encoder's decoding of the ids");
  console.log(`# GPT-2 greedy continuation (${GREEDY} tokens): ${JSON.stringify(r.text.slice(0, 80))}...`);
});

test(
  `${VARIANT}: logits on the prompt equal native's within 1e-4 (all ${V} of every position)`,
  needsNative,
  async () => {
    const L = promptIds.length;
    const program = ptl(['program', ckpt, '--program', 'forward', '--batch', '1', '--seq', String(L)]);
    const inputs = { tokens: { dtype: 'I32', shape: [1, L], data: Int32Array.from(promptIds) } };
    for (const [name, t] of parseSafetensors(new Uint8Array(fs.readFileSync(ckpt))).tensors)
      if (!name.startsWith('optim.')) inputs[name] = { dtype: t.dtype, shape: t.shape, data: f32(t) };
    const bytes = encodeSafetensors(inputs);
    const wasm = f32(parseSafetensors(await module.runProgram(program, bytes)).tensors.get('logits'));
    const native = f32(parseSafetensors(nativeProgramRun(dir, program, bytes, 'forward')).tensors.get('logits'));
    assert.equal(wasm.length, L * V);
    const d = maxAbsDiff(wasm, native);
    console.log(`# logits max abs diff ${d.toExponential(2)} over ${L} x ${V}`);
    assert.ok(d <= 1e-4, `logits differ from native by ${d}`);
    // The first greedy token is the argmax of the last position.
    let best = (L - 1) * V;
    for (let i = best; i < L * V; i++) if (wasm[i] > wasm[best]) best = i;
    const first = (await engine.generate(PROMPT, { maxTokens: 1, temperature: 0 })).ids[0];
    assert.equal(best - (L - 1) * V, first);
  },
);
