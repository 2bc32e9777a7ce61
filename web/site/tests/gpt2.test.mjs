// The Fine-tune panel's GPT-2 flow: a small random GPT-2 folder in the Hugging Face layout
// (tests/wasm/random-gpt2.mjs, TINY: a byte tokenizer, so SwiftShader and WebAssembly are fast)
// is picked file by file and read by the engine; LoRA steps on WebGPU and on WebAssembly draw the
// loss chart, whose loss falls; a sample shows its tokens/s; the PEFT adapter downloads and native
// `ptl lora import-peft` reads it onto native `ptl import-hf` of the same folder; the merged
// model downloads as a Hugging Face folder that native `ptl import-hf` reads; a reload offers the
// model remembered in OPFS; a bad folder shows the engine's message; the folder picker reads the
// same model, and SFT (every weight, WebAssembly) on prompt/response pairs lowers their loss.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';

import { TINY, writeRandomGpt2 } from '../../../tests/wasm/random-gpt2.mjs';
import { OUT, openSite, ptl, shootBoth, waitReady } from './helpers.mjs';

const FILES = ['config.json', 'model.safetensors', 'vocab.json', 'merges.txt'];

test('GPT-2: pick a folder, LoRA on WebGPU and WebAssembly, loss chart, tokens/s, PEFT and merged downloads, remembered after a reload, bad folder refused, the folder picker, SFT', async () => {
  const dir = path.join(OUT, 'gpt2');
  fs.rmSync(dir, { recursive: true, force: true });
  const hf = writeRandomGpt2(path.join(dir, 'tiny-gpt2'), TINY);
  const base = path.join(dir, 'base.tinygpt');
  ptl(['import-hf', hf, '--out', base]);
  const text = path.join(dir, 'style.txt');
  fs.writeFileSync(text, 'the cat sat on the mat. the dog sat on the log.\n'.repeat(200));
  const bad = path.join(dir, 'bad');
  fs.mkdirSync(bad);
  for (const f of FILES.slice(1)) fs.copyFileSync(path.join(hf, f), path.join(bad, f)); // no config.json

  const s = await openSite();
  const { page } = s;
  try {
    await waitReady(page);
    assert.equal(await page.isVisible('#gpt2-remembered'), false, 'nothing remembered yet');

    // A bad folder: the engine's message, and nothing to fine-tune.
    await page.setInputFiles(
      '#gpt2-files',
      FILES.slice(1).map((f) => path.join(bad, f)),
    );
    await page.waitForFunction(() => document.getElementById('gpt2-status').className.includes('error'));
    assert.match(
      await page.textContent('#gpt2-status'),
      /^Could not read the files chosen: config\.json: no such file \(a Hugging Face model folder has config\.json\)/,
    );
    assert.equal(await page.isDisabled('#ft-source option[value="gpt2"]'), true);

    await page.setInputFiles(
      '#gpt2-files',
      FILES.map((f) => path.join(hf, f)),
    );
    await page.waitForFunction(() => document.getElementById('gpt2-status').className.includes('ok'));
    const summary = await page.textContent('#gpt2-status');
    assert.match(
      summary,
      /GPT-2 with 2 layers, d 32, 2 heads, ctx 64, vocab 257, .* 257 ids, .*stored\)\. Remembered in this browser\./,
    );
    assert.equal(await page.inputValue('#ft-source'), 'gpt2');
    const targets = await page.$$eval('input[name="ft-target"]:checked', (els) => els.map((e) => e.value));
    assert.deepEqual(targets, ['qkv', 'o', 'fc_in', 'fc_out'], "GPT-2's modules, PEFT's targets");

    await page.setInputFiles('#ft-file', text);
    await page.fill('#ft-lr', '0.01');
    const fineTune = async (backend, steps) => {
      await page.selectOption('#backend', backend);
      await page.waitForFunction((b) => document.body.dataset.backend === b, backend === 'webgpu' ? 'webgpu' : 'wasm');
      await page.fill('#ft-steps', String(steps));
      await page.click('#ft-start');
      await page.waitForFunction(() => document.body.dataset.ft === 'training');
      await page.waitForFunction(() => document.body.dataset.ft !== 'training', null, { timeout: 6 * 60 * 1000 });
      const status = await page.textContent('#ft-status');
      const m = status.match(/^Fine-tuned (\d+) steps on (\w+), LoRA rank 2, alpha 8 on ([\w, ]+):/);
      assert.ok(m, status);
      const losses = await page.evaluate(() => window.ptlFinetune.losses);
      const drawn = await page.evaluate(() => window.ptlFinetune.chartSteps());
      assert.equal(losses.length, steps, status);
      assert.deepEqual(
        drawn,
        Array.from({ length: steps }, (_, i) => i + 1),
        'the loss chart drew every step',
      );
      assert.ok(losses.at(-1) < losses[0], `the loss falls: ${losses[0]} -> ${losses.at(-1)}`);
      assert.equal(Number(m[1]), steps, status);
      assert.deepEqual(m[3].split(', ').sort(), ['fc_in', 'fc_out', 'o', 'qkv'], status);
      return { status, where: m[2], losses };
    };
    // SwiftShader is slow (seconds a step in Chromium): few steps there.
    const gpu = await fineTune('webgpu', 4);
    assert.equal(gpu.where, 'WebGPU', gpu.status);
    const cpu = await fineTune('wasm-threads', 12);
    assert.equal(cpu.where, 'WebAssembly', cpu.status);
    // The same batches and schedule on both: the first step's loss agrees closely.
    assert.ok(Math.abs(gpu.losses[0] - cpu.losses[0]) / cpu.losses[0] < 1e-3, `${gpu.losses[0]} vs ${cpu.losses[0]}`);

    await page.fill('#ft-prompt', 'the cat');
    await page.click('#ft-compare');
    await page.waitForFunction(() => document.getElementById('ft-speed').textContent.length > 0);
    assert.match(
      await page.textContent('#ft-speed'),
      /^Fine-tuned sample: 200 tokens in [\d.]+ s \([\d.]+ tokens\/s\)\.$/,
    );
    await shootBoth(page, 'gpt2-finetune');

    // Downloads: each button saves its folder's files one by one.
    const downloads = async (button, count) => {
      const got = [];
      const done = new Promise((resolve) => {
        const on = async (d) => {
          got.push(d);
          if (got.length === count) {
            page.off('download', on);
            resolve();
          }
        };
        page.on('download', on);
      });
      await page.click(button);
      await done;
      const out = path.join(dir, button.slice(1));
      fs.mkdirSync(out, { recursive: true });
      for (const d of got) await d.saveAs(path.join(out, d.suggestedFilename()));
      return out;
    };
    const peft = await downloads('#ft-download-peft', 2);
    assert.deepEqual(fs.readdirSync(peft).sort(), ['adapter_config.json', 'adapter_model.safetensors']);
    const config = JSON.parse(fs.readFileSync(path.join(peft, 'adapter_config.json'), 'utf8'));
    assert.equal(config.r, 2);
    assert.deepEqual([...config.target_modules].sort(), ['attn.c_proj', 'c_attn', 'c_fc', 'mlp.c_proj']);
    assert.match(
      ptl(['lora', 'import-peft', peft, '--base', base, '--out', path.join(dir, 'peft.tinygpt-lora')]),
      /LoRA rank 2, alpha 8 on qkv,o,fc_in,fc_out \(20 tensors\)/,
    );
    const merged = await downloads('#ft-download-hf', 3);
    assert.deepEqual(fs.readdirSync(merged).sort(), ['config.json', 'model.safetensors', 'tokenizer.json']);
    assert.match(ptl(['import-hf', merged, '--out', path.join(dir, 'merged.tinygpt')]), /GPT-2 with 2 layers, d 32/);
    // The merge is native's: ptl lora merge of the imported adapter, exported, gives the same weights.
    ptl([
      'lora',
      'merge',
      '--base',
      base,
      '--adapter',
      path.join(dir, 'peft.tinygpt-lora'),
      '--out',
      path.join(dir, 'm.tinygpt'),
    ]);
    ptl(['export-hf', path.join(dir, 'm.tinygpt'), '--out', path.join(dir, 'native-merged')]);
    assert.ok(
      fs
        .readFileSync(path.join(merged, 'model.safetensors'))
        .equals(fs.readFileSync(path.join(dir, 'native-merged', 'model.safetensors'))),
      'the merged weights are native ptl lora merge of the PEFT adapter',
    );

    // A reload offers the remembered model; using it reads it again from OPFS.
    await page.reload();
    await waitReady(page);
    await page.waitForSelector('#gpt2-remembered:not([hidden])');
    assert.match(
      await page.textContent('#gpt2-remembered'),
      /Use the remembered model: config\.json, model\.safetensors, vocab\.json, merges\.txt/,
    );
    await page.click('#gpt2-remembered');
    await page.waitForFunction(() => document.getElementById('gpt2-status').className.includes('ok'));
    assert.match(await page.textContent('#gpt2-status'), /GPT-2 with 2 layers, d 32/);
    assert.doesNotMatch(await page.textContent('#gpt2-status'), /Remembered/, 'read from OPFS, not stored again');
    assert.equal(await page.inputValue('#ft-source'), 'gpt2');

    // The folder picker (webkitdirectory) hands over the whole folder; then SFT on it: every
    // weight, on WebAssembly, on prompt/response pairs whose loss counts only the responses.
    // The status still reads "ok" from the remembered model until the picked folder's reading
    // starts: wait for the new folder's own outcome, which says it was remembered again.
    await page.setInputFiles('#gpt2-folder', hf);
    await page.waitForFunction(() => {
      const el = document.getElementById('gpt2-status');
      return el.className.includes('ok') && el.textContent.includes('Remembered in this browser');
    });
    assert.match(await page.textContent('#gpt2-status'), /GPT-2 with 2 layers, d 32, 2 heads, ctx 64, vocab 257/);
    const pairs = path.join(dir, 'pairs.jsonl');
    const animals = ['cat', 'dog', 'fox', 'owl'];
    fs.writeFileSync(
      pairs,
      Array.from({ length: 40 }, (_, i) =>
        JSON.stringify({ prompt: `Where is the ${animals[i % 4]}?`, response: ` On the mat, ${i % 7}.` }),
      ).join('\n') + '\n',
    );
    await page.selectOption('#backend', 'wasm-threads');
    await page.waitForFunction(() => document.body.dataset.backend === 'wasm');
    await page.selectOption('#ft-mode', 'full');
    await page.setInputFiles('#ft-file', pairs);
    await page.fill('#ft-lr', '0.003');
    await page.fill('#ft-steps', '8');
    await page.click('#ft-start');
    await page.waitForFunction(() => document.body.dataset.ft === 'training');
    await page.waitForFunction(() => document.body.dataset.ft !== 'training', null, { timeout: 6 * 60 * 1000 });
    const sft = await page.textContent('#ft-status');
    assert.match(sft, /^Fine-tuned 8 steps on WebAssembly, every weight \([\d,]+ parameters\)\./, sft);
    const sftLosses = await page.evaluate(() => window.ptlFinetune.losses);
    assert.equal(sftLosses.length, 8, sft);
    assert.ok(sftLosses.at(-1) < sftLosses[0], `the replies' loss falls: ${sftLosses[0]} -> ${sftLosses.at(-1)}`);
    s.assertNoErrors('the GPT-2 flow');
  } finally {
    await s.close();
  }
});
