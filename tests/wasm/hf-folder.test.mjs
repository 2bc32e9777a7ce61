// Hugging Face GPT-2 folders handed to WebAssembly as files (Engine.fromHuggingFace, the C API's
// ptl_folder_file + ptl_create_from_hf), read by the engine code of native `ptl import-hf`: the
// same checkpoint byte for byte, the same greedy text as `ptl sample`, the same error messages
// for a bad folder. A LoRA run on the imported model then exports a PEFT adapter (exportPeft)
// that native `ptl lora import-peft` reads and `ptl lora export-peft` writes back byte for byte,
// and the merged model (exportHuggingFace) that native `ptl lora merge` + `ptl export-hf` write
// byte for byte.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';

import {
  Engine,
  EngineError,
  encodeSafetensors,
  f32,
  load,
  parseSafetensors,
  ptl,
  tmpDir,
  VARIANT,
} from './helpers.mjs';
import { GREEDY, PROMPT, TINY, writeRandomGpt2 } from './random-gpt2.mjs';

let module, dir;
before(async () => {
  module = await load();
  dir = tmpDir('ptl-wasm-hf-');
});
after(() => {
  module?.terminate();
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

const filesOf = (folder) =>
  fs.readdirSync(folder).map((name) => ({ name, bytes: new Uint8Array(fs.readFileSync(path.join(folder, name))) }));

// Native ptl's error line for a command that must fail (its stderr, "error: " dropped).
function nativeError(args) {
  try {
    ptl(args);
  } catch (e) {
    return String(e.stderr)
      .trim()
      .replace(/^(ptl: )?error: /, '');
  }
  assert.fail(`ptl ${args.join(' ')} succeeded`);
}

test(`${VARIANT}: a GPT-2 folder's files make native import-hf's checkpoint, byte for byte, and its greedy text`, async () => {
  const hf = writeRandomGpt2(path.join(dir, 'gpt2'));
  const ckpt = path.join(dir, 'gpt2.tinygpt');
  const line = ptl(['import-hf', hf, '--out', ckpt]).trim();
  const { engine, info } = await Engine.fromHuggingFace(filesOf(hf), module, 'gpt2');
  try {
    assert.equal(`wrote ${ckpt}: ${info.summary}`, line, 'the summary is the line ptl import-hf prints');
    assert.equal(info.tokenizer_stored, true);
    const bytes = await engine.exportCheckpoint({ optimizer: false });
    assert.ok(Buffer.from(bytes).equals(fs.readFileSync(ckpt)), 'the checkpoint equals the native one');
    const r = await engine.generate(PROMPT, { maxTokens: GREEDY, temperature: 0 });
    const sample = ptl(
      ['sample', ckpt, '--prompt', PROMPT, '--temperature', '0', '--max-tokens', String(GREEDY), '--raw'],
      { encoding: 'buffer' },
    );
    assert.deepEqual(Buffer.from(r.tokens), sample.subarray(PROMPT.length, sample.length - 1));
    assert.ok(new Set(r.ids).size > 1, 'a continuation of one repeated token checks little');
  } finally {
    engine.dispose();
  }
});

test(`${VARIANT}: a sharded folder (index + 2 shards, F16) reads as native's`, async () => {
  const one = writeRandomGpt2(path.join(dir, 'tiny'), TINY);
  const sharded = path.join(dir, 'sharded');
  fs.mkdirSync(sharded);
  for (const f of ['config.json', 'vocab.json', 'merges.txt'])
    fs.copyFileSync(path.join(one, f), path.join(sharded, f));
  const { tensors } = parseSafetensors(fs.readFileSync(path.join(one, 'model.safetensors')));
  const shards = [{}, {}];
  const weightMap = {};
  [...tensors].forEach(([name, t], i) => {
    const k = i % 2;
    // F16, as half-size checkpoints are shared: both sides widen the same bits to F32.
    const v = f32(t);
    const h = new Uint16Array(v.length);
    for (let j = 0; j < v.length; j++) h[j] = toHalf(v[j]);
    shards[k][name] = { dtype: 'F16', shape: t.shape, data: h };
    weightMap[name] = `model-0000${k + 1}-of-00002.safetensors`;
  });
  shards.forEach((s, k) =>
    fs.writeFileSync(
      path.join(sharded, `model-0000${k + 1}-of-00002.safetensors`),
      encodeSafetensors(s, { format: 'pt' }),
    ),
  );
  fs.writeFileSync(path.join(sharded, 'model.safetensors.index.json'), JSON.stringify({ weight_map: weightMap }));
  const ckpt = path.join(dir, 'sharded.tinygpt');
  const line = ptl(['import-hf', sharded, '--out', ckpt]).trim();
  assert.match(line, /2 shards, F16/);
  const { engine, info } = await Engine.fromHuggingFace(filesOf(sharded), module, 'sharded');
  try {
    assert.equal(`wrote ${ckpt}: ${info.summary}`, line);
    assert.ok(Buffer.from(await engine.exportCheckpoint({ optimizer: false })).equals(fs.readFileSync(ckpt)));
  } finally {
    engine.dispose();
  }
});

// float32 -> IEEE half, round to nearest even (the values here are normal and in range).
function toHalf(x) {
  const f = new Float32Array([x]);
  const u = new Uint32Array(f.buffer)[0];
  const sign = (u >>> 16) & 0x8000;
  const exp = ((u >>> 23) & 0xff) - 127 + 15;
  let mant = u & 0x7fffff;
  if (exp <= 0) return sign; // flushed (not reached by these values but for exact zeros)
  let h = sign | (exp << 10) | (mant >>> 13);
  const rest = mant & 0x1fff;
  if (rest > 0x1000 || (rest === 0x1000 && h & 1)) h++;
  return h;
}

test(`${VARIANT}: a bad folder is refused with native import-hf's message`, async () => {
  const good = writeRandomGpt2(path.join(dir, 'bad-base'), TINY);
  const cases = [
    ['no-config', (d) => fs.rmSync(path.join(d, 'config.json')), /config\.json: no such file/],
    [
      'wrong-shape',
      (d) => {
        const c = JSON.parse(fs.readFileSync(path.join(d, 'config.json'), 'utf8'));
        c.n_embd = 48; // the weights are d 32
        c.n_head = 2;
        fs.writeFileSync(path.join(d, 'config.json'), JSON.stringify(c));
      },
      /model\.safetensors: tensor 'transformer\.wte\.weight' has shape \[257, 32\] but config\.json needs \[257, 48\]/,
    ],
    [
      'no-weights',
      (d) => fs.rmSync(path.join(d, 'model.safetensors')),
      /no model\.safetensors or model\.safetensors\.index\.json/,
    ],
    ['half-tokenizer', (d) => fs.rmSync(path.join(d, 'merges.txt')), /has vocab\.json but no merges\.txt/],
    [
      'not-gpt2',
      (d) => {
        const c = JSON.parse(fs.readFileSync(path.join(d, 'config.json'), 'utf8'));
        c.model_type = 'llama';
        fs.writeFileSync(path.join(d, 'config.json'), JSON.stringify(c));
      },
      /config\.json: model_type is "llama"; only "gpt2" is read/,
    ],
  ];
  for (const [name, spoil, expected] of cases) {
    const d = path.join(dir, name);
    fs.cpSync(good, d, { recursive: true });
    spoil(d);
    const native = nativeError(['import-hf', d, '--out', path.join(dir, `${name}.tinygpt`)]);
    assert.match(native, expected, name);
    // The folder's path as the label: the very message native prints.
    await assert.rejects(Engine.fromHuggingFace(filesOf(d), module, d), (e) => {
      assert.ok(e instanceof EngineError, name);
      assert.equal(e.engineMessage, native, name);
      return true;
    });
  }
  // The module stays usable, and nothing was left behind for the next import.
  const { engine } = await Engine.fromHuggingFace(filesOf(good), module, 'bad-base');
  engine.dispose();
  await assert.rejects(Engine.fromHuggingFace([], module, 'empty'), /empty\/config\.json: no such file/);
});

test(`${VARIANT}: LoRA on the imported GPT-2 exports PEFT and merged Hugging Face files native ptl reads and writes alike`, async () => {
  const hf = writeRandomGpt2(path.join(dir, 'lora-base'), TINY);
  const ckpt = path.join(dir, 'lora-base.tinygpt');
  ptl(['import-hf', hf, '--out', ckpt]);
  const { engine } = await Engine.fromHuggingFace(filesOf(hf), module, 'lora-base');
  try {
    const text = 'the cat sat on the mat. the dog sat on the log.\n'.repeat(40);
    await engine.setCorpus(text);
    // GPT-2's modules: c_attn (qkv), attn.c_proj (o), mlp.c_fc, mlp.c_proj.
    await engine.startFinetune({ steps: 6, batch: 4, lr: 1e-2, lora: { targets: ['qkv', 'o', 'fc_in', 'fc_out'] } });
    const steps = await engine.train(6);
    assert.ok(steps.at(-1).loss < steps[0].loss, `the loss falls: ${steps[0].loss} -> ${steps.at(-1).loss}`);

    const peft = await engine.exportPeft('my-gpt2');
    assert.deepEqual(
      peft.map((f) => f.name),
      ['adapter_model.safetensors', 'adapter_config.json'],
    );
    const peftDir = path.join(dir, 'peft');
    fs.mkdirSync(peftDir);
    for (const f of peft) fs.writeFileSync(path.join(peftDir, f.name), f.bytes);
    const config = JSON.parse(new TextDecoder().decode(peft[1].bytes));
    assert.equal(config.base_model_name_or_path, 'my-gpt2');
    assert.equal(config.r, 2); // default_lora's rank

    // Native reads it onto its own import of the folder, and writes the same files back.
    const imported = path.join(dir, 'imported.tinygpt-lora');
    assert.match(ptl(['lora', 'import-peft', peftDir, '--base', ckpt, '--out', imported]), /LoRA rank 2/);
    const back = path.join(dir, 'peft-back');
    ptl(['lora', 'export-peft', imported, '--out', back]);
    for (const f of peft)
      assert.ok(fs.readFileSync(path.join(back, f.name)).equals(Buffer.from(f.bytes)), `${f.name} byte for byte`);

    // The engine's own adapter file names the native checkpoint as its base: native merges it.
    const adapter = path.join(dir, 'wasm.tinygpt-lora');
    fs.writeFileSync(path.join(adapter), await engine.exportAdapter());
    const merged = path.join(dir, 'merged.tinygpt');
    ptl(['lora', 'merge', '--base', ckpt, '--adapter', adapter, '--out', merged]);
    const nativeHf = path.join(dir, 'merged-hf');
    ptl(['export-hf', merged, '--out', nativeHf]);
    const ours = await engine.exportHuggingFace();
    assert.deepEqual(ours.map((f) => f.name).sort(), fs.readdirSync(nativeHf).sort());
    for (const f of ours)
      assert.ok(
        fs.readFileSync(path.join(nativeHf, f.name)).equals(Buffer.from(f.bytes)),
        `merged ${f.name} byte for byte`,
      );
    // ... and imports natively to the merged weights.
    const wasmHf = path.join(dir, 'wasm-hf');
    fs.mkdirSync(wasmHf);
    for (const f of ours) fs.writeFileSync(path.join(wasmHf, f.name), f.bytes);
    const again = path.join(dir, 'again.tinygpt');
    ptl(['import-hf', wasmHf, '--out', again]);
    const a = parseSafetensors(fs.readFileSync(again)).tensors;
    const m = parseSafetensors(fs.readFileSync(merged)).tensors;
    for (const [name, t] of m) assert.ok(a.get(name).data.equals(t.data), `${name}: the merged weights`);
    const changed = [...m].filter(
      ([name, t]) => !parseSafetensors(fs.readFileSync(ckpt)).tensors.get(name).data.equals(t.data),
    );
    assert.ok(changed.length > 0, 'the merge changed weights');
    // The engine keeps its adapters.
    assert.equal((await engine.loraInfo()).enabled, true);
  } finally {
    engine.dispose();
  }
});

test(`${VARIANT}: PEFT export of adapters GPT-2 has no module for is refused`, async () => {
  const hf = writeRandomGpt2(path.join(dir, 'qv'), TINY);
  const { engine } = await Engine.fromHuggingFace(filesOf(hf), module, 'qv');
  try {
    await engine.startFinetune({ steps: 1, lora: { targets: ['q', 'v'] } });
    await assert.rejects(engine.exportPeft(), /cannot export to PEFT: .*qkv/);
    await assert.rejects(
      (async () => {
        const { engine: e } = await Engine.fromHuggingFace(filesOf(hf), module, 'qv');
        try {
          await e.exportPeft();
        } finally {
          e.dispose();
        }
      })(),
      /no LoRA adapters to export/,
    );
  } finally {
    engine.dispose();
  }
});
