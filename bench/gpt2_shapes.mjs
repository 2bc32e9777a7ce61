// GPT-2 family shapes for the benchmarks (bench/webgpu_bench.mjs --gpt2, bench/webgpu_memory.mjs) and the
// checkpoint that carries such a shape to `ptl program`.
import { execFileSync } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, openSync, rmSync, truncateSync, writeFileSync, writeSync } from 'node:fs';
import path from 'node:path';

export const GPT2 = {
  gpt2: { layers: 12, d: 768, heads: 12, ctx: 1024, vocab: 50257, batch: 8 },
  'gpt2-medium': { layers: 24, d: 1024, heads: 16, ctx: 1024, vocab: 50257, batch: 8 },
  'gpt2-test': { layers: 2, d: 64, heads: 4, ctx: 32, vocab: 50257, batch: 1 },
};

// The model config reaches `ptl program` through a checkpoint: `ptl import-hf` of a GPT-2 folder whose
// weights are all zero (the file is extended past its header, so nothing is written for them).
export function gpt2Checkpoint(ptl, work, name, m) {
  const dir = path.join(work, `ptl-${name}-L${m.layers}-d${m.d}-h${m.heads}-t${m.ctx}-v${m.vocab}`);
  const ckpt = path.join(dir, 'model.tinygpt');
  if (existsSync(ckpt)) return ckpt;
  const hf = path.join(dir, 'hf');
  mkdirSync(hf, { recursive: true });
  const { layers: L, d, heads, ctx, vocab } = m;
  const config = {
    model_type: 'gpt2',
    vocab_size: vocab,
    n_layer: L,
    n_embd: d,
    n_head: heads,
    n_positions: ctx,
    activation_function: 'gelu_new',
    layer_norm_epsilon: 1e-5,
  };
  writeFileSync(path.join(hf, 'config.json'), JSON.stringify(config));
  const shapes = [
    ['wte.weight', [vocab, d]],
    ['wpe.weight', [ctx, d]],
  ];
  for (let l = 0; l < L; l++)
    for (const [n, sh] of [
      ['ln_1.weight', [d]],
      ['ln_1.bias', [d]],
      ['attn.c_attn.weight', [d, 3 * d]],
      ['attn.c_attn.bias', [3 * d]],
      ['attn.c_proj.weight', [d, d]],
      ['attn.c_proj.bias', [d]],
      ['ln_2.weight', [d]],
      ['ln_2.bias', [d]],
      ['mlp.c_fc.weight', [d, 4 * d]],
      ['mlp.c_fc.bias', [4 * d]],
      ['mlp.c_proj.weight', [4 * d, d]],
      ['mlp.c_proj.bias', [d]],
    ])
      shapes.push([`h.${l}.${n}`, sh]);
  shapes.push(['ln_f.weight', [d]], ['ln_f.bias', [d]]);
  const header = {};
  let offset = 0;
  for (const [n, sh] of shapes) {
    const bytes = sh.reduce((a, b) => a * b, 1) * 4;
    header[n] = { dtype: 'F32', shape: sh, data_offsets: [offset, offset + bytes] };
    offset += bytes;
  }
  let json = JSON.stringify(header);
  while ((json.length + 8) % 8) json += ' ';
  const head = Buffer.alloc(8 + json.length);
  head.writeBigUInt64LE(BigInt(json.length), 0);
  head.write(json, 8, 'utf8');
  const st = path.join(hf, 'model.safetensors');
  const fd = openSync(st, 'w');
  writeSync(fd, head);
  closeSync(fd);
  truncateSync(st, head.length + offset);
  execFileSync(ptl, ['import-hf', hf, '--out', ckpt], { stdio: ['ignore', 'ignore', 'inherit'] });
  rmSync(hf, { recursive: true, force: true });
  return ckpt;
}
