// Puts what the site serves but does not own into place before `astro build` / `astro dev`:
//
//   public/wasm/<variant>/ptl_engine.{js,wasm,worker.js}  from build-wasm/ (wasm/build.sh)
//   public/data/tinyshakespeare.txt                       from $PTL_DATA_DIR or ../shared/data
//   src/generated/presets.json                            from the native `ptl info --preset X --json`
//   src/generated/defaults.json                           the playground's run: `ptl info --defaults
//                                                         --json` (ptl train's), SITE_RUN over it;
//                                                         lora_train: the fine-tune panel's
//   src/generated/bench.json                              from bench/results/*.jsonl
//   src/generated/img/*.svg                               from docs/img/ (the plots of /performance)
//   public/models/pretrained.tinygpt                      the pretrained model (scripts/pretrained.mjs)
//   src/generated/site.json                               {pretrained}: that model, described, or null
//
// The pretrained model: $PTL_PRETRAINED_MODEL when set ("none": no model), else the repository's
// models/shakespeare.tinygpt. It is copied on every build and the copy removed when there is no
// source; the page's "talk to a pretrained model" banner and its sampling panel's default model
// appear only when the build has one.
//
// All of these are ignored by git: the engine is built from source, the corpus is never
// committed, and the preset table has one home (engine/config.cpp).
import { execFileSync } from 'node:child_process';
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

import { SERVED_MODEL, placePretrained, pretrainedSource } from './pretrained.mjs';

const site = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const repo = resolve(site, '../..');
const fail = (msg) => {
  console.error(`copy-assets: ${msg}`);
  process.exit(1);
};

// 1. The WebAssembly engine builds. The threaded one serves isolated pages, the single-thread
//    SIMD one everything else; scalar is optional (very old engines only).
const wasmBuild = process.env.PTL_WASM_BUILD_DIR ?? join(repo, 'build-wasm');
const variants = ['simd-threads', 'simd', 'scalar'];
const found = [];
for (const v of variants) {
  const from = join(wasmBuild, v);
  if (!existsSync(join(from, 'ptl_engine.js'))) continue;
  const to = join(site, 'public/wasm', v);
  mkdirSync(to, { recursive: true });
  for (const f of ['ptl_engine.js', 'ptl_engine.wasm', 'ptl_engine.worker.js'])
    if (existsSync(join(from, f))) copyFileSync(join(from, f), join(to, f));
  found.push(v);
}
for (const need of ['simd-threads', 'simd'])
  if (!found.includes(need)) fail(`no ${need} build in ${wasmBuild}: run 'wasm/build.sh ${need}' first`);

// 2. TinyShakespeare, the default corpus. Without a local copy the page downloads it from its
//    public URL (and checks the sha256), so this is only a convenience.
const dataDirs = [process.env.PTL_DATA_DIR, join(repo, '../shared/data'), join(repo, 'data')].filter(Boolean);
const corpus = dataDirs.map((d) => join(d, 'tinyshakespeare.txt')).find((p) => existsSync(p));
if (corpus) {
  mkdirSync(join(site, 'public/data'), { recursive: true });
  copyFileSync(corpus, join(site, 'public/data/tinyshakespeare.txt'));
} else {
  console.warn('copy-assets: tinyshakespeare.txt not found locally; the page will download it');
}

// 3. The presets, described by the engine itself.
const ptl = process.env.PTL_NATIVE_BIN ?? join(repo, 'build/ptl');
if (!existsSync(ptl)) fail(`native ptl not found at ${ptl}: build it (scripts/run.sh or cmake) or set PTL_NATIVE_BIN`);
const names = ['tiny', 'small', 'medium', 'large', 'xl', 'huge', 'massive', 'mega', 'behemoth'];
const presets = names.map((name) => {
  const info = JSON.parse(execFileSync(ptl, ['info', '--preset', name, '--json'], { encoding: 'utf8' }));
  return {
    name,
    model: info.model_config,
    batch: info.training_memory.batch,
    parameters: info.parameters,
    training_bytes: info.training_memory.total_bytes,
  };
});
mkdirSync(join(site, 'src/generated'), { recursive: true });
writeFileSync(join(site, 'src/generated/presets.json'), JSON.stringify(presets, null, 1) + '\n');
// The playground's defaults: the settings of `ptl train` with no options (cli/train.cpp holds
// them), except where a browser needs another run. WebAssembly trains about four times slower
// than native code on the same cores, so the site's first run is a smaller preset at a higher
// rate: it reaches validation loss 1.75 after about 3,000 steps, 2 to 3 minutes at the
// WebAssembly benchmark's speed on two idle cores, where ptl's Medium needs over five
// (docs/performance.md, "The playground's default run"; bench/site_default_run.mjs times it).
// `ptl train --preset small --steps 4000 --lr 0.003` is the same run natively.
const SITE_RUN = { preset: 'small', steps: 4000, lr: 0.003 };
const ptlDefaults = JSON.parse(execFileSync(ptl, ['info', '--defaults', '--json'], { encoding: 'utf8' }));
const defaults = { ...ptlDefaults, ...SITE_RUN, ptl: ptlDefaults };
const defaultPreset = presets.find((p) => p.name === defaults.preset);
if (!defaultPreset) fail(`the default preset ${defaults.preset} is not a preset`);
if (defaults.preset !== ptlDefaults.preset) defaults.batch = defaultPreset.batch; // as ptl: the preset's
// The fine-tune panel's: `ptl lora train`'s, unchanged (the same run in the browser).
if (!ptlDefaults.lora_train) fail(`${ptl} is older than this site: 'ptl info --defaults --json' has no lora_train`);
writeFileSync(join(site, 'src/generated/defaults.json'), JSON.stringify(defaults, null, 1) + '\n');

// 4. Benchmark figures for /performance: the results of record, one JSON-lines file per benchmark
//    in bench/results/ (its first line the header: machine, engine, command), keyed by the file's
//    stem; and the plots of docs/performance.md (docs/img/*.svg), which the page links as assets.
const bench = {};
const results = join(repo, 'bench/results');
for (const f of existsSync(results)
  ? readdirSync(results)
      .filter((n) => n.endsWith('.jsonl'))
      .sort()
  : []) {
  const rows = readFileSync(join(results, f), 'utf8')
    .split('\n')
    .filter((l) => l.trim())
    .map((l, i) => {
      try {
        return JSON.parse(l);
      } catch {
        fail(`bench/results/${f}, line ${i + 1}: not JSON`);
      }
    });
  bench[f.replace(/\.jsonl$/, '')] = {
    header: rows.find((r) => r.kind === 'header') ?? null,
    rows: rows.filter((r) => r.kind !== 'header'),
  };
}
writeFileSync(join(site, 'src/generated/bench.json'), JSON.stringify(bench) + '\n');
const img = join(site, 'src/generated/img');
mkdirSync(img, { recursive: true });
for (const f of readdirSync(join(repo, 'docs/img')).filter((n) => n.endsWith('.svg')))
  copyFileSync(join(repo, 'docs/img', f), join(img, f));
// 5. What the /kernels page compares the visitor's WebAssembly engine against: native ptl's
//    losses for 20 steps of Tiny on TinyShakespeare (seed 1337, the defaults) and its greedy
//    continuation of a prompt from that checkpoint.
if (corpus) {
  const tmp = mkdtempSync(join(tmpdir(), 'ptl-site-fixture-'));
  try {
    execFileSync(
      ptl,
      [
        'train',
        '--preset',
        'tiny',
        '--steps',
        '20',
        '--data',
        corpus,
        '--out',
        tmp,
        '--eval-every',
        '1000',
        '--sample-every',
        '0',
      ],
      { stdio: 'ignore' },
    );
    const losses = readFileSync(join(tmp, 'metrics.jsonl'), 'utf8')
      .split('\n')
      .filter((l) => l.trim())
      .map((l) => JSON.parse(l))
      .filter((m) => typeof m.train_loss === 'number')
      .map((m) => m.train_loss);
    const prompt = 'ROMEO:';
    // stdout: the prompt, the 64 generated bytes, then a newline the CLI adds.
    const greedy = execFileSync(
      ptl,
      ['sample', join(tmp, 'model.tinygpt'), '--prompt', prompt, '--temperature', '0', '--max-tokens', '64', '--raw'],
      { encoding: 'latin1', stdio: ['ignore', 'pipe', 'ignore'] },
    );
    writeFileSync(
      join(site, 'src/generated/native-tiny.json'),
      JSON.stringify({
        preset: 'tiny',
        steps: 20,
        seed: 1337,
        losses,
        prompt,
        greedy_hex: Buffer.from(greedy, 'latin1')
          .subarray(prompt.length, prompt.length + 64)
          .toString('hex'),
      }) + '\n',
    );
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
} else {
  writeFileSync(join(site, 'src/generated/native-tiny.json'), 'null\n');
}

// 6. The pretrained model, described by `ptl info` for the banner (what it is, how far trained).
const servedModel = join(site, 'public', SERVED_MODEL);
let source;
try {
  source = pretrainedSource({ repo });
} catch (e) {
  fail(e.message);
}
let pretrained = null;
if (source) {
  let info;
  try {
    info = JSON.parse(
      execFileSync(ptl, ['info', source.path, '--json'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }),
    );
  } catch (e) {
    fail(
      `the pretrained model ${source.path} (${source.origin}) does not load: ${String(e.stderr ?? e.message).trim()}`,
    );
  }
  const m = info.model_config;
  pretrained = {
    url: SERVED_MODEL,
    origin: source.origin,
    bytes: statSync(source.path).size,
    parameters: info.parameters,
    n_layers: m.n_layers,
    d_model: m.d_model,
    n_heads: m.n_heads,
    ctx: m.ctx,
    step: info.step,
    dtype: info.weights_dtype,
    val_loss: info.last_loss?.val_loss ?? null,
    // The corpus it learnt, by name (its path is the training machine's).
    data: /tinyshakespeare/i.test(info.train_config?.data_path ?? '')
      ? 'TinyShakespeare'
      : info.train_config?.data_path
        ? basename(info.train_config.data_path)
        : null,
    sha256: info.sha256,
  };
}
placePretrained(source?.path ?? null, servedModel);
writeFileSync(join(site, 'src/generated/site.json'), JSON.stringify({ pretrained }, null, 1) + '\n');

console.log(
  `copy-assets: wasm builds ${found.join(', ')}; corpus ${corpus ? 'copied' : 'remote'}; ${presets.length} presets; ${Object.keys(bench).length} benchmark files; pretrained model ${source ? `${source.path} (${source.origin})` : 'none'}`,
);
