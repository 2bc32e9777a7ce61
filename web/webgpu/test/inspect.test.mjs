// "Watch the model think" on WebGPU: the engine's inspect program (forward pass + attention_probs
// per layer) against the CPU engine running the same program (`ptl_program_run kernel`), from a
// Tiny checkpoint trained here for a few hundred steps. The WebGPU side runs the full-context
// program on the prompt padded at the end (WebGPUInspector); the CPU runs a program of exactly
// the prompt's length, so the comparison also checks that padding does not leak backwards.
// Required: the same top-10 next bytes at every position, and every attention map within the
// reduction tolerance (atol 2e-5, rtol 1e-4), zeros above the diagonal exactly.
import assert from 'node:assert/strict';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, test } from 'node:test';

import { TOL, WebGPUInspector, compare, decodeSafeTensors, encodeSafeTensors } from '../dist/index.js';
import { OUT, backend, closeBackend, findCorpus, run, tool } from './helpers.mjs';

const dir = join(OUT, 'inspect');
rmSync(dir, { recursive: true, force: true });
mkdirSync(dir, { recursive: true });
const PROMPT = 'ROMEO: What say';
const summary = {};

test("inspect: WebGPU top-10 and attention maps equal the CPU engine's", async (t) => {
  const ptl = tool('ptl');
  const ckpt = join(dir, 'model.tinygpt');
  run(ptl, [
    'train',
    '--preset',
    'tiny',
    '--steps',
    '200',
    '--lr',
    '3e-3',
    '--eval-every',
    '200',
    '--sample-every',
    '0',
    '--threads',
    '1',
    '--out',
    dir,
    '--data',
    findCorpus(),
  ]);
  const help = run(ptl, ['program', '--help']);
  if (!/inspect/.test(help)) return t.skip('this ptl has no inspect program yet (ptl program --program inspect)');
  const tokens = [...new TextEncoder().encode(PROMPT)];
  const L = tokens.length;
  run(ptl, ['program', ckpt, '--program', 'inspect', '--out', join(dir, 'inspect.json')]);
  run(ptl, ['program', ckpt, '--program', 'inspect', '--seq', String(L), '--out', join(dir, 'inspect_L.json')]);

  // CPU: the program of length L on the checkpoint's parameters and the prompt.
  const params = decodeSafeTensors(new Uint8Array(readFileSync(ckpt))).tensors.filter(
    (x) => !x.name.startsWith('optim.'),
  );
  writeFileSync(
    join(dir, 'in.safetensors'),
    encodeSafeTensors({
      metadata: {},
      tensors: [...params, { name: 'tokens', dtype: 'I32', shape: [1, L], data: Int32Array.from(tokens) }],
    }),
  );
  run(tool('ptl_program_run'), [
    'kernel',
    '--program',
    join(dir, 'inspect_L.json'),
    '--in',
    join(dir, 'in.safetensors'),
    '--out',
    join(dir, 'out.safetensors'),
  ]);
  const cpu = new Map(
    decodeSafeTensors(new Uint8Array(readFileSync(join(dir, 'out.safetensors')))).tensors.map((x) => [x.name, x.data]),
  );

  // WebGPU: the full-context program, prompt padded.
  const { backend: be } = await backend();
  be.loadWeights(params);
  const insp = await WebGPUInspector.create(be, readFileSync(join(dir, 'inspect.json'), 'utf8'));
  assert.equal(insp.seq, 32);
  const gpu = await insp.inspect(tokens);
  assert.equal(gpu.probs.length, 2, 'Tiny has 2 layers');

  const cpuIns = { vocab: 256, logits: cpu.get('logits') };
  let topDiffers = 0;
  for (let i = 0; i < L; i++) {
    const g = WebGPUInspector.topK(gpu, i, 10),
      c = WebGPUInspector.topK(cpuIns, i, 10);
    // Same bytes in the same order; two neighbours may only swap if their probabilities tie
    // within fp32 noise.
    for (let r = 0; r < 10; r++)
      if (g[r].token !== c[r].token) {
        topDiffers++;
        assert.ok(
          Math.abs(g[r].prob - c[r].prob) < 1e-5,
          `position ${i} rank ${r}: gpu ${g[r].token} (${g[r].prob}), cpu ${c[r].token} (${c[r].prob})`,
        );
      }
  }
  const lc = compare(gpu.logits, cpu.get('logits'), TOL.reduction.atol, TOL.reduction.rtol);
  summary.logits = { max_abs: lc.maxAbs, max_rel: lc.maxRel };
  summary.top10_swaps = topDiffers;
  summary.probs = [];
  gpu.probs.forEach((p, layer) => {
    const want = cpu.get(`blocks.${layer}.attn.probs`);
    assert.ok(want, `CPU output has blocks.${layer}.attn.probs`);
    const c = compare(p, want, TOL.reduction.atol, TOL.reduction.rtol);
    summary.probs.push({ layer, max_abs: c.maxAbs, max_rel: c.maxRel });
    assert.ok(c.ok, `layer ${layer} attention maps: max abs ${c.maxAbs} at ${c.worst}`);
    for (let h = 0; h < gpu.heads; h++)
      for (let i = 0; i < L; i++)
        for (let j = i + 1; j < L; j++)
          assert.equal(p[(h * L + i) * L + j], 0, `layer ${layer} head ${h}: key ${j} > query ${i}`);
  });
  assert.ok(lc.ok, `logits: max abs ${lc.maxAbs}`);
  console.log(
    `inspect: logits max abs ${lc.maxAbs.toExponential(2)}; probs max abs ${summary.probs.map((x) => x.max_abs.toExponential(2)).join(', ')}; top-10 swaps ${topDiffers}`,
  );
  insp.destroy();
});

after(() => {
  writeFileSync(join(OUT, 'inspect.json'), JSON.stringify(summary, null, 1));
  closeBackend();
});
