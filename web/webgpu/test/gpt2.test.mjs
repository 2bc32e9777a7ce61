// A random GPT-2 with GPT-2's real tokenizer (V = 50,257; tests/wasm/random-gpt2.mjs writes the
// Hugging Face folder, `ptl import-hf` makes the checkpoint) generating on WebGPU: the logits
// after the prompt (in gpt-3-encoder's ids) are the CPU engine's within 1e-4, and 100 greedy
// tokens are the CPU engine's (ptl_program_run model), decoded to `ptl sample`'s text.
// python_ref makes the same model and checks it against the CPU engine
// (tests/python/test_gpt2_tokenizer.py); WebAssembly too (tests/wasm/gpt2.test.mjs).
import assert from 'node:assert/strict';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, test } from 'node:test';

import { WebGPUGenerator, decodeSafeTensors } from '../dist/index.js';
import { GREEDY, PROMPT, gpt3Encoder, writeRandomGpt2 } from '../../../tests/wasm/random-gpt2.mjs';
import { OUT, backend, closeBackend, run, tool } from './helpers.mjs';

const V = 50257;
const dir = join(OUT, 'gpt2');
rmSync(dir, { recursive: true, force: true });
mkdirSync(dir, { recursive: true });

test(`GPT-2 with its real tokenizer: ${GREEDY} greedy tokens on WebGPU equal the CPU engine's, logits within 1e-4`, async () => {
  const ptl = tool('ptl');
  const ckpt = join(dir, 'gpt2.tinygpt');
  assert.match(
    run(ptl, ['import-hf', writeRandomGpt2(join(dir, 'hf')), '--out', ckpt]),
    /vocab 50257.*50257 ids, byte-level BPE, stored/,
  );
  writeFileSync(join(dir, 'prompt.txt'), PROMPT);
  const ids = JSON.parse(
    run(ptl, ['tokenizer', 'encode', '--tokenizer', ckpt, '--data', join(dir, 'prompt.txt'), '--json']),
  ).ids;
  assert.deepEqual(ids, gpt3Encoder.encode(PROMPT), "ptl's ids are gpt-3-encoder's");

  // The CPU engine: logits on the prompt and the greedy continuation (the KV-cache program).
  const cpuOut = join(dir, 'cpu.json');
  run(tool('ptl_program_run'), [
    'model',
    '--checkpoint',
    ckpt,
    '--tokens',
    ids.join(','),
    '--greedy',
    String(GREEDY),
    '--out',
    cpuOut,
  ]);
  const cpu = JSON.parse(readFileSync(cpuOut, 'utf8'));
  assert.ok(new Set(cpu.greedy).size > 1, 'a continuation of one repeated token checks little');

  run(ptl, ['program', ckpt, '--program', 'generate', '--out', join(dir, 'generate.json')]);
  const { backend: be } = await backend();
  be.loadWeights(
    decodeSafeTensors(new Uint8Array(readFileSync(ckpt))).tensors.filter((t) => !t.name.startsWith('optim.')),
  );
  const gen = await WebGPUGenerator.create(be, readFileSync(join(dir, 'generate.json'), 'utf8'));
  assert.equal(gen.vocab, V);
  try {
    const logits = await gen.prefill(ids);
    const want = cpu.logits.at(-1);
    let d = 0;
    for (let i = 0; i < V; i++) d = Math.max(d, Math.abs(logits[i] - want[i]));
    console.log(`logits after the prompt: max abs diff ${d.toExponential(2)} over ${V}`);
    assert.ok(d <= 1e-4, `logits differ from the CPU engine's by ${d}`);

    const t0 = performance.now();
    const gpu = await gen.generate(ids, { temperature: 0, maxTokens: GREEDY });
    const text = gpt3Encoder.decode(gpu);
    console.log(
      `${GREEDY} tokens in ${((performance.now() - t0) / 1000).toFixed(1)} s: ${JSON.stringify(text.slice(0, 80))}...`,
    );
    assert.deepEqual(gpu, cpu.greedy, 'WebGPU greedy tokens differ from the CPU engine');

    // ptl sample --raw: the prompt, the continuation's bytes, a newline.
    const sample = Buffer.from(
      run(ptl, ['sample', ckpt, '--prompt', PROMPT, '--temperature', '0', '--max-tokens', String(GREEDY), '--raw'], {
        encoding: 'buffer',
      }),
    );
    assert.equal(sample.subarray(0, PROMPT.length).toString(), PROMPT);
    assert.equal(text, new TextDecoder().decode(sample.subarray(PROMPT.length, sample.length - 1)));
  } finally {
    gen.destroy();
  }
});

after(() => closeBackend());
