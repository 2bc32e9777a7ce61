// The playground page: wires the controls to the training worker and draws what it reports.
import presets from '../generated/presets.json';
import { selectBuild, type Variant as BuildVariant } from '@posttrainllm/engine';
import { Dashboard } from './charts.js';
import { checkpointHistoryRows } from './runs.js';
import { HfError, loadHfDataset, tinyShakespeare } from './corpus.js';
import type {
  Backend,
  InspectResult,
  Methods,
  ModelSummary,
  RunSettings,
  RunState,
  TokenizerChoice,
  Variant,
} from './protocol.js';
import { Session } from './session.js';
import { wireFinetune } from './finetune.js';
import { saveFile } from './save-file.js';

const $ = <T extends HTMLElement = HTMLElement>(id: string): T => {
  const el = document.getElementById(id);
  if (!el) throw new Error(`playground: no element #${id}`);
  return el as T;
};
const base = import.meta.env.BASE_URL;
const num = (id: string): number => Number($<HTMLInputElement>(id).value);

interface Choice {
  backend: Backend;
  variant: Variant;
  threads: number;
  reason: string;
}

let session: Session;
let loadedVariant: Variant | null = null;
let choice: Choice;
let gpuAdapter = false;
let gpuSoftware = ''; // the adapter's name when it is a software rasteriser (SwiftShader ...), else
let gflops = 0; // WebAssembly speed measured at load, for estimates
let model: ModelSummary | null = null;
// What the current model is, in words ("your Medium run", "model.tinygpt", "the pretrained model"),
// and whether it is the pretrained one: the sampling panel says which model it samples from.
let modelLabel = '';
let modelIsPretrained = false;
let corpusReady = false;
// 'tokenizing': a BPE tokenizer trains in the worker (its calls wait behind it).
let running: 'training' | 'generating' | 'tokenizing' | null = null;
let runStartStep = 0;
let runStartTime = 0;
let dash: Dashboard;
let finetune: { refresh: () => void } | null = null;
// A read-only view of the run for tools and tests (the dashboard draws the same numbers).
const hook = {
  losses: [] as number[],
  lrs: [] as number[],
  evals: [] as number[],
  // Each validation of the runs since the page loaded: step, loss, the run's training seconds at
  // that step and the page's clock (performance.now(), ms); `started`: the clock at each Start
  // or Resume press (bench/site_default_run.mjs measures the default run's time to a loss);
  // heapBytes: the WebAssembly engine's memory then (bench/site_memory.mjs).
  evalLog: [] as { step: number; loss: number; trainSeconds: number; pageMs: number; heapBytes?: number }[],
  started: [] as number[],
  chartSteps: (): number[] => dash.lossSteps(),
  inspect: null as InspectResult | null,
};
(window as unknown as { ptlRun: typeof hook }).ptlRun = hook;

function status(text: string, kind: '' | 'warn' | 'error' | 'ok' = ''): void {
  const el = $('status');
  el.textContent = text;
  el.className = `status ${kind}`.trim();
}

function settings(): RunSettings {
  return {
    steps: Math.max(1, Math.floor(num('steps'))),
    batch: Math.max(1, Math.floor(num('batch'))),
    lr: num('lr'),
    schedule: $<HTMLSelectElement>('schedule').value as RunSettings['schedule'],
    dropout: num('dropout'),
    seed: Math.max(0, Math.floor(num('seed'))),
    evalEvery: Math.max(0, Math.floor(num('eval-every'))),
    sampleEvery: Math.max(0, Math.floor(num('sample-every'))),
    autosaveEvery: Math.max(0, Math.floor(num('autosave-every'))),
  };
}

const preset = () => presets.find((p) => p.name === $<HTMLSelectElement>('preset').value) ?? presets[0]!;
const mib = (b: number) => (b >= 1024 ** 3 ? `${(b / 1024 ** 3).toFixed(2)} GiB` : `${(b / 1024 ** 2).toFixed(1)} MiB`);
function duration(s: number): string {
  if (!isFinite(s)) return '–';
  if (s < 90) return `${Math.round(s)} s`;
  if (s < 5400) return `${Math.round(s / 60)} min`;
  return `${(s / 3600).toFixed(1)} h`;
}

/** Training FLOPs of one step: 6 per parameter and token, plus the attention products. */
function flopsPerStep(p: (typeof presets)[number], batch: number): number {
  const { n_layers: L, d_model: d, ctx: T } = p.model;
  return batch * T * (6 * p.parameters + 12 * L * T * d);
}

function describePreset(): void {
  describeGuide();
  const p = preset();
  const s = settings();
  const mem = p.training_bytes * (s.batch / p.batch); // activations dominate and scale with the batch
  const est = gflops > 0 ? duration((flopsPerStep(p, s.batch) * s.steps) / (gflops * 1e9)) : 'measuring…';
  // The shape is here rather than in the option, whose text the select cuts off at this width.
  $('preset-info').textContent =
    `${p.model.n_layers} layers × d ${p.model.d_model}, ${p.model.n_heads} heads, context ${p.model.ctx}: ` +
    `${p.parameters.toLocaleString()} parameters; about ${mib(mem)} to train at batch ${s.batch} (preset default ${p.batch}). ` +
    `Estimated time for ${s.steps} steps with WebAssembly on this machine: ${est}` +
    (gflops > 0 ? ` (measured ${gflops.toFixed(1)} GFLOP/s)` : '') +
    (choice?.backend === 'webgpu'
      ? gpuSoftware
        ? `; WebGPU on ${gpuSoftware} is much slower.`
        : '; WebGPU is usually much faster.'
      : '.') +
    (mem > 4 * 1024 ** 3 && choice?.backend !== 'webgpu'
      ? ' This is more than WebAssembly can address (4 GiB): choose a smaller preset or batch, or WebGPU.'
      : '');
}

/**
 * How long to train for readable text. The step counts are from runs of this engine on
 * TinyShakespeare at batch 16, warm-up + cosine: Tiny at learning rate 0.001, Small with the
 * page's defaults (4,000 steps at 0.003), Medium with `ptl train`'s (4,000 steps at 0.002); the
 * time is this machine's, from the speed measured at load.
 */
function describeGuide(): void {
  const p = preset();
  const s = settings();
  const timeFor = (steps: number, name: string) => {
    const q = presets.find((x) => x.name === name) ?? p;
    return gflops > 0
      ? ` Here, ${steps.toLocaleString()} steps of ${name[0]!.toUpperCase() + name.slice(1)} take about ${duration((flopsPerStep(q, s.batch) * steps) / (gflops * 1e9))} with WebAssembly.`
      : '';
  };
  const guide: Record<string, string> = {
    tiny: 'Tiny learns letters, spacing and line breaks, not words: after 1,500 steps its samples are still made-up words (validation loss about 2.2). For readable words choose Small.',
    small:
      "Small writes play-shaped text (speaker names, lines, short words like 'the' and 'and') after about 500 steps, mostly real words after about 1,500 (validation loss near 1.95), and recognisable verse once the loss is near 1.75, after about 3,000 of the default 4,000 steps (it ends near 1.70)." +
      timeFor(3000, 'small'),
    medium:
      "Medium learns more per step, but a step costs about four of Small's: at learning rate 0.002 (ptl train's default), a 4,000-step run reaches validation loss 1.75 after about 2,000 steps and ends near 1.58." +
      timeFor(2000, 'medium'),
  };
  $('steps-guide').textContent =
    guide[p.name] ??
    `Larger presets learn more per step, but each step takes longer: watch the validation loss; near 2.0, Small's samples are mostly real words.`;
}

// ---------------------------------------------------------------------------------------------
// Backend choice

async function detectGpu(): Promise<boolean> {
  const gpu = (navigator as Navigator & { gpu?: GPU }).gpu;
  if (!gpu) return false;
  try {
    const adapter = await gpu.requestAdapter();
    if (!adapter) return false;
    // A CPU-emulated adapter trains hundreds of times slower than WebAssembly: Auto skips it.
    const a = adapter as GPUAdapter & {
      isFallbackAdapter?: boolean;
      info?: GPUAdapterInfo & { isFallbackAdapter?: boolean };
    };
    const name = [a.info?.vendor, a.info?.architecture, a.info?.description].filter((x) => x).join(' ');
    if (a.isFallbackAdapter || a.info?.isFallbackAdapter || /swiftshader|llvmpipe|lavapipe|software/i.test(name))
      gpuSoftware = name || 'a software adapter';
    return true;
  } catch {
    return false;
  }
}

function chooseBackend(): Choice {
  const want = $<HTMLSelectElement>('backend').value;
  const p = preset();
  const wasm = selectBuild({
    model: p.model,
    batch: settings().batch,
    available: ['simd-threads', 'simd', 'scalar'] as BuildVariant[],
  });
  const variant = wasm.variant as Variant;
  const threaded = variant === 'simd-threads';
  const caps = wasm.capabilities;
  // Why there are no threads, in a few words (selectBuild's reason is a sentence of its own).
  const noThreads = !caps.crossOriginIsolated ? 'the page is not cross-origin isolated' : 'no shared memory here';
  const wasmName = (v: Variant, n: number) =>
    `WebAssembly (${v === 'scalar' ? 'no SIMD' : 'SIMD'}, ${v === 'simd-threads' ? `${n} threads` : 'one thread'})`;
  const wasmAuto = wasmName(variant, wasm.threads) + (threaded ? '' : `: ${noThreads}`);
  const wasmChoice = (reason: string): Choice => ({ backend: 'wasm', variant, threads: wasm.threads, reason });
  if (want === 'webgpu') {
    if (gpuAdapter)
      return {
        backend: 'webgpu',
        variant,
        threads: wasm.threads,
        reason: 'WebGPU (data and sampling on WebAssembly).',
      };
    return wasmChoice(`${wasmAuto}. WebGPU is not available in this browser.`);
  }
  if (want === 'wasm-single') {
    const v = variant === 'scalar' ? 'scalar' : 'simd';
    return { backend: 'wasm', variant: v, threads: 1, reason: `${wasmName(v, 1)}, as you asked.` };
  }
  if (want === 'wasm-threads') {
    if (threaded) return wasmChoice(`${wasmName(variant, wasm.threads)}, as you asked.`);
    return { ...wasmChoice(`${wasmName(variant, 1)}: no threads, ${noThreads}.`), threads: 1 };
  }
  if (gpuAdapter && gpuSoftware)
    return wasmChoice(
      `Auto chose ${wasmAuto}. This browser's WebGPU (${gpuSoftware}) runs on the CPU, slower; choose WebGPU to use it anyway.`,
    );
  if (gpuAdapter) return { backend: 'webgpu', variant, threads: wasm.threads, reason: 'Auto chose WebGPU.' };
  return wasmChoice(`Auto chose ${wasmAuto}. This browser has no WebGPU.`);
}

/** Loads (or reloads) the worker with the build the choice needs; keeps the model across. */
async function applyChoice(): Promise<void> {
  choice = chooseBackend();
  $('backend-info').textContent = choice.reason;
  if (loadedVariant !== choice.variant) {
    let carry: Uint8Array | null = null;
    if (session && model) carry = await session.call('exportCheckpoint', { optimizer: true });
    const next = new Session();
    const build = await next.call('load', { variant: choice.variant, threads: choice.threads });
    await session?.close(); // its model came along as `carry`; its threads must not linger
    session = next;
    loadedVariant = choice.variant;
    document.body.dataset['threads'] = String(build.threads ? build.num_threads : 1);
    if (carry) model = (await session.call('open', { bytes: carry, name: 'current model' })) as ModelSummary;
    if (corpusBytes) await session.call('setCorpus', { bytes: corpusBytes, info: corpusInfo });
  }
  // The worker trains, samples and inspects on this backend from now on.
  const m = await session.call('setBackend', { backend: choice.backend });
  if (m) model = m;
  document.body.dataset['backend'] = choice.backend;
  document.body.dataset['variant'] = choice.variant;
  describePreset();
}

// ---------------------------------------------------------------------------------------------
// Corpus

let corpusBytes: Uint8Array | null = null;
let corpusInfo = { name: '', bytes: 0 };

/** The corpus line after a failed load: the error, and what training uses meanwhile. */
function corpusFailed(message: string): void {
  const still = corpusReady && corpusInfo.name ? ` Training still uses ${corpusInfo.name}.` : ' No training text yet.';
  $('corpus-info').textContent = `${message}${still}`;
  status(`${message}${still}`, 'error');
}

async function setCorpus(bytes: Uint8Array, name: string): Promise<void> {
  const ctx = preset().model.ctx;
  if (bytes.length < 10 * (ctx + 1))
    throw new Error(
      `${name} has ${bytes.length} bytes: too short to train on (the context is ${ctx} bytes; give at least ${10 * (ctx + 1)})`,
    );
  corpusBytes = bytes;
  corpusInfo = { name, bytes: bytes.length };
  const split = await session.call('setCorpus', { bytes, info: corpusInfo });
  corpusReady = true;
  if (model && split.train_tokens !== undefined && split.val_tokens !== undefined) {
    // The current model reads the new text in its own tokens (the line under the choice counts them).
    const { train_bytes, val_bytes, train_tokens, val_tokens } = split;
    model = { ...model, info: { ...model.info, corpus: { train_bytes, val_bytes, train_tokens, val_tokens } } };
    describeModelTokenizer();
  }
  let utf8 = true;
  try {
    new TextDecoder('utf-8', { fatal: true }).decode(bytes.subarray(0, 1 << 20));
  } catch {
    utf8 = false; // the engine trains on bytes either way; a binary file is rarely what was meant
  }
  $('corpus-info').textContent =
    `${name}: ${bytes.length.toLocaleString()} bytes (${split.train_bytes.toLocaleString()} to train on, ${split.val_bytes.toLocaleString()} held out for validation).` +
    (utf8 ? '' : ' It is not UTF-8 text (a binary file?): the model will learn its bytes as they are.');
  if ($('status').classList.contains('error')) status(`Training text: ${name}.`, 'ok');
  document.body.dataset['corpus'] = name;
  refreshButtons();
  if (tokenizerChoice().kind === 'bpe') await prepareTokenizer();
}

function corpusSource(): string {
  return (document.querySelector('input[name="corpus"]:checked') as HTMLInputElement).value;
}

async function onCorpusSource(): Promise<void> {
  const src = corpusSource();
  $('upload-box').hidden = src !== 'upload';
  $('hf-box').hidden = src !== 'hf';
  if (src !== 'shakespeare' && corpusReady)
    $('corpus-info').textContent =
      `Training uses ${corpusInfo.name || 'the restored text'} until you ${src === 'upload' ? 'choose a file' : 'load a dataset'}.`;
  if (src === 'shakespeare') {
    $('corpus-info').textContent = 'Loading TinyShakespeare…';
    try {
      await setCorpus(await tinyShakespeare(base), 'TinyShakespeare');
    } catch (e) {
      $('corpus-info').textContent = String(e instanceof Error ? e.message : e);
    }
  }
}

async function onUpload(): Promise<void> {
  const f = $<HTMLInputElement>('corpus-file').files?.[0];
  if (!f) return;
  try {
    await setCorpus(new Uint8Array(await f.arrayBuffer()), f.name);
  } catch (e) {
    corpusFailed(`Could not use ${f.name}: ${e instanceof Error ? e.message : String(e)}.`);
  }
}

let hfAbort: AbortController | null = null;
async function onHfLoad(): Promise<void> {
  hfAbort?.abort();
  hfAbort = new AbortController();
  const req = {
    api: $<HTMLInputElement>('hf-api').value.trim(),
    dataset: $<HTMLInputElement>('hf-dataset').value.trim(),
    config: $<HTMLInputElement>('hf-config').value.trim(),
    split: $<HTMLInputElement>('hf-split').value.trim(),
    column: $<HTMLInputElement>('hf-column').value.trim(),
    budgetBytes: Math.max(1024, Math.floor(num('hf-budget') * 1e6)),
  };
  const info = $('corpus-info');
  if (!req.dataset || !req.split || !req.column || !req.config) {
    info.textContent = 'Give the dataset, config, split and column.';
    return;
  }
  info.textContent = `Loading ${req.dataset}…`;
  try {
    const bytes = await loadHfDataset(
      req,
      (b, rows) => {
        info.textContent = `Loading ${req.dataset}: ${rows.toLocaleString()} rows, ${(b / 1e6).toFixed(2)} of ${(req.budgetBytes / 1e6).toFixed(2)} MB`;
      },
      hfAbort.signal,
    );
    await setCorpus(bytes, `hf:${req.dataset}/${req.config}/${req.split}:${req.column}`);
  } catch (e) {
    corpusFailed(
      e instanceof HfError ? `Dataset: ${e.message}.` : `Dataset: ${e instanceof Error ? e.message : String(e)}.`,
    );
  }
}

// ---------------------------------------------------------------------------------------------
// Tokens: what a new run's model reads

const tokenizerRadios = () => document.querySelectorAll<HTMLInputElement>('input[name="tokenizer"]');

function tokenizerChoice(): TokenizerChoice {
  const bpe = document.querySelector<HTMLInputElement>('input[name="tokenizer"]:checked')?.value === 'bpe';
  return bpe ? { kind: 'bpe', vocabSize: num('bpe-vocab') } : { kind: 'bytes' };
}

/** Whether the current model reads bytes (no model yet: what a new run would read). */
function readsBytes(): boolean {
  return model ? model.info.tokenizer.type === 'byte' : tokenizerChoice().kind === 'bytes';
}

/** What the current model reads, under the choice (a model's tokenizer is fixed when it is made). */
function describeModelTokenizer(): void {
  const el = $('model-tokenizer');
  if (!model) {
    el.hidden = true;
    return;
  }
  const t = model.info.tokenizer;
  const c = model.info.corpus;
  dash.setVocabulary(model.info.model.vocab_size);
  const reads =
    t.type === 'byte'
      ? 'bytes (256 tokens)'
      : t.type === 'bpe'
        ? `a BPE tokenizer of ${t.vocab_size.toLocaleString()} tokens`
        : `token ids (${t.vocab_size.toLocaleString()}), not text`;
  const tokens =
    c && t.type === 'bpe'
      ? `: ${c.train_tokens.toLocaleString()} training tokens of ${c.train_bytes.toLocaleString()} bytes (${(c.train_bytes / Math.max(1, c.train_tokens)).toFixed(2)} bytes per token)`
      : '';
  el.textContent = `The current model reads ${reads}${tokens}. Resume keeps its tokens; the choice above is for a new run.`;
  el.hidden = false;
  document.body.dataset['tokenizer'] = `${t.type}:${t.vocab_size}`;
}

/** Trains the chosen BPE tokenizer on the current text in the worker (once per text and size). */
async function prepareTokenizer(): Promise<void> {
  const choice = tokenizerChoice();
  const info = $('tokenizer-info');
  if (choice.kind === 'bytes') {
    info.textContent = 'A new run reads bytes: every byte is a token (256 tokens).';
    return;
  }
  if (!corpusReady) {
    info.textContent = 'The tokenizer trains once the training text is loaded.';
    return;
  }
  if (running !== null) return; // Start trains it when it is not ready
  const n = choice.vocabSize;
  if (!(Number.isInteger(n) && n >= 257 && n <= 65536)) {
    info.textContent = `The vocabulary must be a whole number from 257 to 65,536 (got ${$<HTMLInputElement>('bpe-vocab').value}).`;
    return;
  }
  running = 'tokenizing';
  refreshButtons();
  try {
    const t = await session.call('prepareTokenizer', { choice }, (ev) => {
      if (ev.event === 'progress') info.textContent = ev.data.message;
    });
    info.textContent =
      `A new run reads a BPE tokenizer of ${t.vocabSize.toLocaleString()} tokens (the 256 bytes, ${t.merges.toLocaleString()} merges, <|endoftext|>), ` +
      `trained on the training part of ${t.corpus} in ${t.seconds.toFixed(1)} s.` +
      (t.vocabSize < n ? ` The text ran out of pairs to merge before ${n.toLocaleString()}.` : '');
    document.body.dataset['bpe'] = String(t.vocabSize);
  } catch (e) {
    info.textContent = `Could not train the tokenizer: ${e instanceof Error ? e.message : String(e)}.`;
  } finally {
    running = null;
    refreshButtons();
  }
}

function onTokenizerChoice(): void {
  $('bpe-box').hidden = tokenizerChoice().kind !== 'bpe';
  void prepareTokenizer();
}

// ---------------------------------------------------------------------------------------------
// Training

interface PretrainedInfo {
  url: string;
  about: string;
  bytes: number;
}

/** The build's pretrained model (the banner's data), or null when the build has none. */
function pretrainedInfo(): PretrainedInfo | null {
  const el = document.getElementById('pretrained-banner');
  if (!el) return null;
  return { url: el.dataset['url']!, about: el.dataset['about']!, bytes: Number(el.dataset['bytes']) };
}

const size = (b: number) => (b >= 1e6 ? `${(b / 1e6).toFixed(0)} MB` : `${Math.ceil(b / 1e3)} KB`);

/** Which model the sampling and inspection panels use, in a sentence ('' when there is none). */
function samplingModel(): string {
  const pre = pretrainedInfo();
  if (model === null)
    return pre
      ? `Uses the pretrained model (${pre.about}); the first use downloads it (${size(pre.bytes)}). Train a run or open a checkpoint to use your own.`
      : '';
  if (modelIsPretrained) return `Uses the pretrained model (${pre?.about ?? `step ${model.info.step}`}).`;
  return `Uses ${modelLabel}, at step ${model.info.step.toLocaleString()}.`;
}

/** The model to sample or inspect: the current one, else the pretrained model, loaded now. */
async function ensureModel(): Promise<boolean> {
  if (model === null && pretrainedInfo()) await loadPretrained({ fromPanel: true });
  return model !== null;
}

function refreshButtons(): void {
  const idle = running === null;
  $<HTMLButtonElement>('start').disabled = !idle || !corpusReady;
  $<HTMLButtonElement>('pause').disabled = running !== 'training';
  $<HTMLButtonElement>('stop').disabled = running !== 'training';
  // The pretrained model is not a run to continue: Start trains one, Fine-tune adapts it.
  const canResume = idle && model !== null && !modelIsPretrained && corpusReady && model.info.step < settings().steps;
  $<HTMLButtonElement>('resume').disabled = !canResume;
  $<HTMLButtonElement>('download').disabled = !idle || model === null;
  // Before any model, a build with a pretrained model samples and inspects that one (loaded on
  // the first use).
  const pretrained = pretrainedInfo() !== null;
  $<HTMLButtonElement>('generate').disabled = !idle || (model === null && !pretrained);
  $<HTMLButtonElement>('gen-stop').disabled = running !== 'generating';
  $<HTMLButtonElement>('inspect').disabled = !idle || (model === null && !pretrained);
  // A disabled button says why, and what enables it.
  const why =
    model === null && !pretrained
      ? 'No model yet: press Start new run (under Training) or open a checkpoint (Keep your work).'
      : running === 'training'
        ? 'The model is training: press Pause or Stop to use it here.'
        : running === 'tokenizing'
          ? 'A tokenizer is training for the next run: a moment.'
          : '';
  for (const id of ['gen-why', 'inspect-why']) {
    $(id).textContent = why;
    $(id).hidden = why === '';
  }
  const which = samplingModel();
  for (const id of ['gen-model', 'inspect-model']) {
    $(id).textContent = which;
    $(id).hidden = which === '';
  }
  document.body.dataset['samplingModel'] = model === null ? (pretrained ? 'pretrained' : 'none') : modelLabel;
  // What a run is made with: they change between runs only (Resume keeps the run's).
  for (const id of ['preset', 'backend', 'batch', 'seed', 'dropout', 'bpe-vocab'])
    $<HTMLInputElement>(id).disabled = !idle;
  for (const r of tokenizerRadios()) r.disabled = !idle;
  document.body.dataset['state'] = running ?? (model ? 'ready' : 'empty');
  finetune?.refresh();
}

function showStats(step: number, total: number, loss?: number, tps?: number): void {
  $('s-step').textContent = `${step} / ${total}`;
  if (loss !== undefined) $('s-loss').textContent = loss.toFixed(4);
  if (tps !== undefined) $('s-tps').textContent = Math.round(tps).toLocaleString();
  const done = step - runStartStep;
  if (step >= total) $('s-eta').textContent = 'done';
  else if (running === 'training' && done > 0) {
    const per = (performance.now() - runStartTime) / 1000 / done;
    $('s-eta').textContent = duration(per * (total - step));
  } else $('s-eta').textContent = '–';
}

/** `bpb`: the validation's bits per byte; unknown (a checkpoint's history) only for a BPE model. */
function showEval(loss: number, bpb?: number): void {
  $('s-val').textContent = loss.toFixed(4);
  $('s-ppl').textContent = Math.exp(loss).toFixed(2);
  // A byte-level model's loss is per byte; a BPE model's per token, which spans several bytes.
  const bits = bpb ?? (readsBytes() ? loss / Math.LN2 : undefined);
  $('s-bpb').textContent = bits === undefined ? '–' : bits.toFixed(3);
}

function addSample(step: number, text: string): void {
  const li = document.createElement('li');
  const h = document.createElement('strong');
  h.textContent = `Step ${step}`;
  const pre = document.createElement('pre');
  pre.className = 'text';
  pre.textContent = text;
  li.append(h, pre);
  $('samples').prepend(li);
}

function replay(state: RunState): void {
  dash.reset();
  $('samples').replaceChildren();
  hook.losses.length = 0;
  hook.lrs.length = 0;
  for (const m of state.steps) {
    dash.step(m.step, m.loss, m.tokens_per_s, m.lr, m.grad_norm);
    hook.losses.push(m.loss);
    hook.lrs.push(m.lr);
  }
  for (const e of state.evals) {
    dash.validation(e.step, e.loss);
    showEval(e.loss, e.bits_per_byte);
  }
  for (const s of state.samples) addSample(s.step, s.text);
  const last = state.steps.at(-1);
  showStats(last?.step ?? 0, state.settings.steps, last?.loss, last?.tokens_per_s);
  $<HTMLInputElement>('steps').value = String(state.settings.steps);
  $<HTMLInputElement>('lr').value = String(state.settings.lr);
  $<HTMLSelectElement>('schedule').value = state.settings.schedule;
  $<HTMLInputElement>('dropout').value = String(state.settings.dropout ?? 0); // older autosaves: none
  $<HTMLInputElement>('batch').value = String(state.settings.batch);
  $<HTMLInputElement>('seed').value = String(state.settings.seed);
}

/** What is wrong with the settings, checked before anything is cleared or started. */
function settingsProblem(s: RunSettings): string | null {
  if (!(s.lr > 0 && isFinite(s.lr))) return 'the learning rate must be a positive number';
  if (!(s.dropout >= 0 && s.dropout < 1)) return 'Dropout must be at least 0 and below 1';
  if (!isFinite(num('steps')) || num('steps') < 1) return 'Steps must be at least 1';
  if (!isFinite(num('batch')) || num('batch') < 1) return 'Batch must be at least 1';
  return null;
}

let stopRequested = false;
// The step at which the current model was last downloaded or opened from a file (null: never):
// a model trained past it exists only in this tab (and its autosave, which a new run replaces).
let keptStep: number | null = null;

/** Whether "Start new run" may replace the current model: asks when it has unsaved training. */
function mayDiscardModel(): boolean {
  if (model === null || model.info.step === 0 || model.info.step === keptStep) return true;
  return window.confirm(
    `Start a new run and discard the current model (step ${model.info.step})? It has not been downloaded. ` +
      'Cancel, then press "Download .tinygpt" to keep it.',
  );
}

/** A failed autosave: a line that stays until a save works again; training goes on. */
function autosaveFailed(step: number, reason: string, kept: number | null): void {
  const el = $('autosave-status');
  el.textContent =
    `Autosave failed at step ${step}: ${reason}. ` +
    (kept !== null
      ? `The previous autosave, step ${kept}, is kept (a reload restores it). `
      : 'This run has no autosave yet. ') +
    'Training goes on; the next autosave tries again. To keep this step, press "Download .tinygpt".';
  el.hidden = false;
  document.body.dataset['autosaveFailed'] = String(step);
}

async function runTraining(fresh: boolean): Promise<void> {
  const s = settings();
  const problem = settingsProblem(s);
  if (problem) {
    status(`Cannot train: ${problem}.`, 'error');
    return;
  }
  if (fresh && !mayDiscardModel()) {
    status('Kept the current model: nothing was started.');
    return;
  }
  $('restore-banner').hidden = true; // the run on screen is the one that trains (and autosaves) now
  stopRequested = false;
  running = 'training';
  hook.started.push(performance.now());
  refreshButtons();
  try {
    await applyChoice();
    if (fresh) {
      status(`Creating ${preset().name}…`);
      dash.reset();
      hook.losses.length = 0;
      hook.lrs.length = 0;
      hook.evals.length = 0;
      $('samples').replaceChildren();
      for (const id of ['s-val', 's-ppl', 's-bpb', 's-loss', 's-tps', 's-eta']) $(id).textContent = '–';
      $('autosave-status').hidden = true; // about the run this one replaces
      const tokenizer = tokenizerChoice();
      model = await session.call('create', { preset: preset().name, settings: s, tokenizer }, (ev) => {
        if (ev.event === 'progress') {
          status(ev.data.message);
          $('tokenizer-info').textContent = ev.data.message;
        }
      });
      modelLabel = `your ${preset().name[0]!.toUpperCase() + preset().name.slice(1)} run`;
      modelIsPretrained = false;
      describeModelTokenizer();
    }
    runStartStep = model!.info.step;
    runStartTime = performance.now();
    const trainingLine = `Training on ${choice.backend === 'webgpu' ? 'WebGPU' : `WebAssembly (${loadedVariant})`}…`;
    status(trainingLine);
    let starting = false; // the line shows the start's progress until the first step
    let lastElapsed = 0;
    const r = await session.call('train', { settings: s }, (ev) => {
      if (ev.event === 'progress') {
        status(ev.data.message);
        starting = true;
      } else if (ev.event === 'step') {
        if (starting) status(trainingLine);
        starting = false;
        dash.step(ev.data.step, ev.data.loss, ev.data.tokens_per_s, ev.data.lr, ev.data.grad_norm);
        hook.losses.push(ev.data.loss);
        hook.lrs.push(ev.data.lr);
        lastElapsed = ev.data.elapsed_s;
        showStats(ev.data.step, s.steps, ev.data.loss, ev.data.tokens_per_s);
        document.body.dataset['step'] = String(ev.data.step);
      } else if (ev.event === 'eval') {
        dash.validation(ev.data.step, ev.data.loss);
        hook.evals.push(ev.data.loss);
        hook.evalLog.push({
          step: ev.data.step,
          loss: ev.data.loss,
          trainSeconds: lastElapsed,
          pageMs: performance.now(),
          ...(ev.heapBytes !== undefined ? { heapBytes: ev.heapBytes } : {}),
        });
        showEval(ev.data.loss, ev.data.bits_per_byte);
      } else if (ev.event === 'sample') {
        addSample(ev.data.step, ev.data.text);
      } else if (ev.event === 'autosave') {
        document.body.dataset['autosaved'] = String(ev.data.step);
        $('autosave-status').hidden = true; // a save works again: the warning is out of date
      } else if (ev.event === 'autosaveFailed') {
        autosaveFailed(ev.data.step, ev.data.reason, ev.data.kept);
      }
    });
    model = { ...model!, info: { ...model!.info, step: r.step } };
    const where =
      r.backend === 'webgpu' ? `WebGPU${r.adapter ? ` (${r.adapter})` : ''}` : `WebAssembly (${loadedVariant})`;
    if (r.reason === 'done') status(`Finished ${r.step} steps on ${where}.`, 'ok');
    else if (stopRequested) {
      // Stop ends the run here: Steps becomes the step reached (raise it to continue later).
      $<HTMLInputElement>('steps').value = String(r.step);
      showStats(r.step, r.step);
      status(`Stopped at step ${r.step} on ${where}. To train further, raise Steps and press Resume.`, 'ok');
    } else status(`Paused at step ${r.step} on ${where}. Resume continues the same run.`);
  } catch (e) {
    status(`Training stopped: ${e instanceof Error ? e.message : String(e)}`, 'error');
  } finally {
    running = null;
    refreshButtons();
  }
}

// ---------------------------------------------------------------------------------------------
// Sampling and inspection

async function generate(): Promise<void> {
  if (!(await ensureModel())) return;
  running = 'generating';
  refreshButtons();
  const out = $('gen-out');
  const prompt = $<HTMLTextAreaElement>('prompt').value;
  out.textContent = prompt;
  const tokens = new TokenView(out);
  try {
    const r = await session.call(
      'generate',
      {
        prompt,
        maxTokens: Math.floor(num('length')),
        temperature: num('temperature'),
        topK: Math.floor(num('top-k')),
        topP: num('top-p'),
        seed: Math.floor(num('gen-seed')),
      },
      (ev) => {
        if (ev.event === 'token') tokens.add(ev.data.ids, ev.data.text);
      },
    );
    const what = readsBytes()
      ? `${r.tokens} bytes`
      : `${r.tokens} tokens (${new TextEncoder().encode(r.text).length.toLocaleString()} bytes)`;
    $('gen-stats').textContent =
      `${what} in ${r.seconds.toFixed(2)} s: ${(r.tokens / Math.max(r.seconds, 1e-9)).toFixed(1)} tokens/s; first token after ${(r.firstTokenSeconds * 1000).toFixed(0)} ms.`;
  } catch (e) {
    status(`Sampling failed: ${e instanceof Error ? e.message : String(e)}`, 'error');
  } finally {
    running = null;
    refreshButtons();
  }
}

/**
 * Sampled text shown token by token: one span per token (a character split across tokens: one
 * span for them all), told apart by alternating backgrounds (the output's "tokens" class), with
 * the token ids as the span's title.
 */
class TokenView {
  private last: HTMLSpanElement | null = null;
  constructor(private readonly host: HTMLElement) {}
  add(ids: number[], text: string): void {
    if (ids.length === 0 && this.last) {
      this.last.textContent += text; // the end: what a split character left, on its last token
      return;
    }
    const span = document.createElement('span');
    span.className = 'tok';
    span.textContent = text;
    span.title = ids.length === 1 ? `token ${ids[0]}` : `tokens ${ids.join(', ')}`;
    span.dataset['ids'] = ids.join(' ');
    this.host.append(span);
    this.last = span;
  }
}

/** A token's bytes in words, for the top 10 and the tooltips: 'e', space, ' the', 0xe2 0x80. */
function tokenName(bytes: number[]): string {
  if (bytes.length === 1) return byteName(bytes[0]!);
  try {
    const text = new TextDecoder('utf-8', { fatal: true }).decode(Uint8Array.from(bytes));
    // Control characters as escapes, as printable() writes a byte.
    const shown = [...text].map((c) => (c.length === 1 && c.charCodeAt(0) < 128 ? printable(c.charCodeAt(0)) : c));
    return `'${shown.join('')}'`;
  } catch {
    return bytes.map((b) => `0x${b.toString(16).padStart(2, '0')}`).join(' '); // part of a character
  }
}

/** A token as a one-character axis label: its first character (a byte's symbol for one byte). */
function tokenLabel(bytes: number[]): string {
  if (bytes.length === 1) return byteLabel(bytes[0]!);
  const first = [...new TextDecoder('utf-8').decode(Uint8Array.from(bytes))][0] ?? '·';
  return first === ' ' ? '␣' : first === '\n' ? '↵' : first === '\ufffd' || first < ' ' ? '·' : first;
}

function printable(b: number): string {
  if (b === 10) return '\\n';
  if (b < 32 || b >= 127) return `0x${b.toString(16).padStart(2, '0')}`;
  return String.fromCharCode(b);
}

/** A byte as a one-character axis label: space, newline and non-printable bytes get symbols. */
function byteLabel(b: number): string {
  if (b === 32) return '␣';
  if (b === 10) return '↵';
  if (b < 32 || b >= 127) return '·';
  return String.fromCharCode(b);
}

/** A byte in words, for the tooltip. */
function byteName(b: number): string {
  return b === 32 ? 'space' : `'${printable(b)}'`;
}

function drawInspect(r: InspectResult): void {
  const bars = $('top10');
  bars.replaceChildren();
  for (const { token, prob, piece } of r.top) {
    const k = document.createElement('span');
    k.textContent = tokenName(piece); // "space", not '␠': missing from many fonts
    k.title = `token ${token}`;
    const barWrap = document.createElement('span');
    const bar = document.createElement('span');
    bar.className = 'bar';
    bar.style.display = 'block';
    bar.style.width = `${Math.max(1, prob * 100)}%`;
    barWrap.append(bar);
    const v = document.createElement('span');
    v.textContent = `${(prob * 100).toFixed(1)}%`;
    bars.append(k, barWrap, v);
  }
  const host = $('attention');
  host.replaceChildren();
  const T = r.T;
  hook.inspect = r;
  const unit = readsBytes() ? 'byte' : 'token';
  // The prompt as the model read it, token by token (a character split across tokens: one span).
  const seen = $('inspect-tokens');
  seen.replaceChildren();
  const view = new TokenView(seen);
  const utf8 = new TextDecoder('utf-8');
  let ids: number[] = [];
  r.pieces.forEach((p, i) => {
    ids.push(r.tokens[i]!);
    const text = utf8.decode(Uint8Array.from(p), { stream: true });
    if (text) {
      view.add(ids, text);
      ids = [];
    }
  });
  const tail = utf8.decode();
  if (tail || ids.length) view.add(ids, tail);
  $('inspect-tokens-h').textContent = `The prompt in ${T} ${unit}s`;
  // One tooltip for every map: query byte, key byte and the probability under the pointer.
  const tip = document.createElement('div');
  tip.className = 'attn-tip';
  tip.id = 'attn-tip';
  tip.setAttribute('role', 'status');
  tip.hidden = true;
  const labels = (cls: string) => {
    const d = document.createElement('div');
    d.className = cls;
    d.setAttribute('aria-hidden', 'true'); // the tooltip and the prompt field say the same in words
    for (const p of r.pieces) {
      const span = document.createElement('span');
      span.textContent = tokenLabel(p);
      d.append(span);
    }
    return d;
  };
  for (let l = 0; l < r.layers; l++) {
    const h3 = document.createElement('h3');
    h3.textContent = `Layer ${l + 1}`;
    const grid = document.createElement('div');
    grid.className = 'heads';
    for (let h = 0; h < r.heads; h++) {
      const map = r.attention[l]![h]!;
      const fig = document.createElement('figure');
      const box = document.createElement('div');
      box.className = 'attn';
      box.style.setProperty('--n', String(T));
      const c = document.createElement('canvas');
      c.width = T;
      c.height = T;
      c.setAttribute('role', 'img');
      c.setAttribute(
        'aria-label',
        `Attention map of layer ${l + 1}, head ${h + 1}: rows are the prompt's ${unit}s as queries, columns the ${unit}s they attend to`,
      );
      const g = c.getContext('2d')!;
      const img = g.createImageData(T, T);
      for (let i = 0; i < T * T; i++) {
        const v = Math.round(255 * (1 - Math.sqrt(Math.min(1, map[i]!)))); // sqrt: small weights stay visible
        img.data.set([v, v, Math.min(255, v + 25), 255], i * 4);
      }
      g.putImageData(img, 0, 0);
      c.addEventListener('pointermove', (ev) => {
        const rect = c.getBoundingClientRect();
        const i = Math.min(T - 1, Math.max(0, Math.floor(((ev.clientY - rect.top) / rect.height) * T)));
        const j = Math.min(T - 1, Math.max(0, Math.floor(((ev.clientX - rect.left) / rect.width) * T)));
        const p = map[i * T + j]!;
        tip.textContent =
          `Layer ${l + 1}, head ${h + 1}: query ${tokenName(r.pieces[i]!)} (${unit} ${i + 1}) → key ${tokenName(r.pieces[j]!)} (${unit} ${j + 1}): ` +
          (j > i ? `a later ${unit}, never attended to` : `${(p * 100).toFixed(1)}%`);
        const hostRect = host.getBoundingClientRect();
        tip.style.left = `${ev.clientX - hostRect.left + 12}px`;
        tip.style.top = `${ev.clientY - hostRect.top + 12}px`;
        tip.hidden = false;
      });
      c.addEventListener('pointerleave', () => (tip.hidden = true));
      box.append(document.createElement('span'), labels('cols'), labels('rows'), c);
      const cap = document.createElement('figcaption');
      cap.textContent = `head ${h + 1}`;
      fig.append(box, cap);
      grid.append(fig);
    }
    host.append(h3, grid);
  }
  host.append(tip);
  $('inspect-out').hidden = false;
}

async function inspect(): Promise<void> {
  if (!$<HTMLInputElement>('inspect-prompt').value) {
    status('Type a prompt to inspect: the maps show how each of its tokens attends to the ones before it.', 'error');
    return;
  }
  if (!(await ensureModel())) return;
  running = 'generating';
  refreshButtons();
  try {
    drawInspect(await session.call('inspect', { prompt: $<HTMLInputElement>('inspect-prompt').value }));
  } catch (e) {
    status(`Inspection failed: ${e instanceof Error ? e.message : String(e)}`, 'error');
  } finally {
    running = null;
    refreshButtons();
  }
}

// ---------------------------------------------------------------------------------------------
// Files

async function download(): Promise<void> {
  let bytes: Uint8Array;
  try {
    bytes = await session.call('exportCheckpoint', { optimizer: true });
  } catch (e) {
    status(`Download: ${e instanceof Error ? e.message : String(e)}`, 'error');
    return;
  }
  saveFile(bytes, `${model?.info ? `ptl-step${model.info.step}` : 'model'}.tinygpt`);
  keptStep = model?.info.step ?? null;
}

/** Whether the bytes read as UTF-8 text (their first KiB). */
function looksLikeText(bytes: Uint8Array): boolean {
  const head = bytes.subarray(0, 1024);
  // A control byte other than tab, newline, vertical tab, form feed or carriage return: binary.
  if (bytes.length === 0 || head.some((b) => b < 9 || (b > 13 && b < 32))) return false;
  try {
    new TextDecoder('utf-8', { fatal: true }).decode(head, { stream: true }); // a cut character is fine
    return true;
  } catch {
    return false;
  }
}

/**
 * Opens a checkpoint as the current model. A file opened by the visitor becomes the run to
 * continue (Steps follows it); the pretrained model leaves the training settings as they are.
 */
async function openCheckpoint(bytes: Uint8Array, name: string, { pretrained = false } = {}): Promise<void> {
  // The loss history in the checkpoint's header (read before the bytes go to the worker); a
  // checkpoint without one (older, or converted from elsewhere) opens with empty charts.
  let history: [number, number | null, number | null][];
  try {
    history = checkpointHistoryRows(bytes, name);
  } catch {
    history = [];
  }
  try {
    const r = await session.call('open', { bytes, name });
    model = r;
    modelLabel = pretrained ? 'the pretrained model' : name;
    modelIsPretrained = pretrained;
    keptStep = r.info.step; // it is in the file it came from
    $('restore-banner').hidden = true; // its Resume would now train this model over the saved run
    dash.reset();
    dash.history(history);
    $('samples').replaceChildren();
    for (const id of ['s-loss', 's-val', 's-ppl', 's-bpb', 's-tps', 's-eta']) $(id).textContent = '–';
    const info = r.info;
    const lastTrain = history.filter(([, t]) => t !== null).at(-1)?.[1] ?? undefined;
    const lastVal = history.filter(([, , v]) => v !== null).at(-1)?.[2] ?? undefined;
    if (!pretrained) $<HTMLInputElement>('steps').value = String(Math.max(info.train.steps, info.step));
    describePreset();
    showStats(info.step, Math.max(info.train.steps, info.step), lastTrain);
    if (lastVal !== undefined) showEval(lastVal);
    describeModelTokenizer();
    document.body.dataset['historyRows'] = String(history.length);
    status(
      `Opened ${name}: ${info.model.n_layers} layers × d ${info.model.d_model}, ${info.param_count.toLocaleString()} parameters, step ${info.step}.`,
      'ok',
    );
    document.body.dataset['opened'] = name;
  } catch (e) {
    const why = e instanceof Error ? e.message : String(e);
    // A text dropped or opened here was most likely meant as training text.
    const text = /not a safetensors file/.test(why) && looksLikeText(bytes);
    status(
      `Could not open ${name}: ${why}. The current model is unchanged.` +
        (text ? ' It looks like text: to train on it, choose "Upload a .txt file" under Training text.' : ''),
      'error',
    );
  } finally {
    refreshButtons();
  }
}

/**
 * Downloads the build's pretrained model and makes it the current model. From the banner the
 * sampling panel comes into view; from that panel (no model yet) it just loads, then samples.
 */
async function loadPretrained({ fromPanel = false } = {}): Promise<void> {
  const pre = pretrainedInfo();
  if (!pre || running !== null) return;
  if (!fromPanel && modelIsPretrained) {
    $('sampling').scrollIntoView({ behavior: 'smooth', block: 'start' });
    $('prompt').focus({ preventScroll: true });
    return;
  }
  if (!mayDiscardModel()) {
    status('Kept the current model: the pretrained model was not loaded.');
    return;
  }
  running = 'generating'; // no other action while it downloads and opens
  refreshButtons();
  status(`Downloading the pretrained model (${size(pre.bytes)})…`);
  try {
    const r = await fetch(`${base}${pre.url}`);
    if (!r.ok) throw new Error(`HTTP ${r.status}`);
    const bytes = new Uint8Array(await r.arrayBuffer());
    running = null;
    await openCheckpoint(bytes, 'the pretrained model', { pretrained: true });
    if (modelIsPretrained && !fromPanel) {
      $('sampling').scrollIntoView({ behavior: 'smooth', block: 'start' });
      $('prompt').focus({ preventScroll: true });
    }
  } catch (e) {
    status(`Could not load the pretrained model: ${e instanceof Error ? e.message : String(e)}`, 'error');
  } finally {
    running = null;
    refreshButtons();
  }
}

/**
 * Reopens the autosaved run, if any; true when it brought its own corpus back. A damaged autosave
 * is named in the banner, with Discard to delete it, and the page goes on without it.
 */
async function tryRestore(): Promise<boolean> {
  let r: Methods['restore']['result'];
  try {
    r = await session.call('restore', {});
  } catch (e) {
    const why = e instanceof Error ? e.message : String(e);
    $('restore-text').textContent =
      `Your autosaved run could not be restored: ${why}. It is left as it is until you discard it ` +
      "(a new run's autosave replaces it); the rest of the page works.";
    $('restore-resume').hidden = true;
    $('restore-banner').hidden = false;
    // A warning, not an error: the page works without it (and a corpus loading next keeps the line).
    status(`Could not restore the autosave: ${why}.`, 'warn');
    document.body.dataset['restoreFailed'] = why;
    return false;
  }
  if (!r) return false;
  model = r;
  modelLabel = `your autosaved ${r.state.preset === 'custom' ? '' : `${r.state.preset[0]!.toUpperCase()}${r.state.preset.slice(1)} `}run`;
  modelIsPretrained = false;
  replay(r.state);
  const finished = r.info.step >= r.state.settings.steps;
  const lostText = Boolean(r.state.corpus.name && !r.corpus);
  $('restore-text').textContent =
    `Your last run (${r.state.preset}, ${r.state.corpus.name || 'no corpus'}) was autosaved at step ${r.info.step} of ${r.state.settings.steps}` +
    (finished ? ': it had finished (raise Steps and press Resume to train it further).' : '.') +
    (lostText
      ? ` Its training text (${r.state.corpus.name}) is missing from the autosave or damaged: choose it again before resuming.`
      : '');
  $('restore-resume').hidden = finished || lostText;
  $('restore-banner').hidden = false;
  if (r.state.corpus.name && r.corpus) {
    corpusReady = true;
    corpusBytes = r.corpus; // kept here too, so that a change of backend (a new worker) has it
    corpusInfo = { ...r.state.corpus };
    $('corpus-info').textContent = `${r.state.corpus.name}: ${r.state.corpus.bytes.toLocaleString()} bytes (restored).`;
  }
  describeModelTokenizer();
  document.body.dataset['restored'] = String(r.info.step);
  status(`Restored the autosaved run at step ${r.info.step}.`, 'ok');
  return corpusReady;
}

// ---------------------------------------------------------------------------------------------

export async function startPlayground(): Promise<void> {
  dash = new Dashboard({ loss: $('chart-loss'), speed: $('chart-speed'), lr: $('chart-lr'), norm: $('chart-norm') });
  $<HTMLInputElement>('log-scale').addEventListener('change', (e) =>
    dash.setLogScale((e.target as HTMLInputElement).checked),
  );
  for (const id of ['preset', 'steps', 'batch']) $(id).addEventListener('change', () => describePreset());
  $('preset').addEventListener('change', () => {
    $<HTMLInputElement>('batch').value = String(preset().batch);
    void applyChoice();
  });
  // The visitor's backend choice survives a reload (and with it an autosaved run's backend).
  const saved = localStorage.getItem('ptl.backend');
  if (saved && [...$<HTMLSelectElement>('backend').options].some((o) => o.value === saved))
    $<HTMLSelectElement>('backend').value = saved;
  $('backend').addEventListener('change', () => {
    localStorage.setItem('ptl.backend', $<HTMLSelectElement>('backend').value);
    void applyChoice()
      .then(() => {
        // The previous line ("Stopped at step 30 on WebGPU") described the backend left behind.
        const where = choice.backend === 'webgpu' ? 'WebGPU' : 'WebAssembly';
        if (running === null)
          status(
            model ? `Switched to ${where}; the model (step ${model.info.step}) came along.` : `Switched to ${where}.`,
          );
      })
      .catch((e) => status(String(e), 'error'));
  });
  for (const r of document.querySelectorAll<HTMLInputElement>('input[name="corpus"]'))
    r.addEventListener('change', () => void onCorpusSource());
  $('corpus-file').addEventListener('change', () => void onUpload());
  for (const r of tokenizerRadios()) r.addEventListener('change', () => onTokenizerChoice());
  $('bpe-vocab').addEventListener('change', () => void prepareTokenizer());
  $('hf-load').addEventListener('click', () => void onHfLoad());
  $('start').addEventListener('click', () => void runTraining(true));
  $('resume').addEventListener('click', () => void runTraining(false));
  $('restore-resume').addEventListener('click', () => {
    $('restore-banner').hidden = true;
    void runTraining(false);
  });
  $('restore-discard').addEventListener('click', () => {
    $('restore-banner').hidden = true;
    void session.call('clearAutosave', {}).then(() => {
      document.body.dataset['autosaveDiscarded'] = 'true';
      if (document.body.dataset['restoreFailed']) status('Discarded the damaged autosave.', 'ok');
    });
  });
  $('pause').addEventListener('click', () => void session.abort());
  $('stop').addEventListener('click', () => {
    stopRequested = true;
    void session.abort();
  });
  // Resume depends on Steps being above the model's step.
  for (const ev of ['input', 'change']) $('steps').addEventListener(ev, () => refreshButtons());
  $('generate').addEventListener('click', () => void generate());
  $('gen-stop').addEventListener('click', () => void session.abort());
  $('inspect').addEventListener('click', () => void inspect());
  $('download').addEventListener('click', () => void download());
  $('open-file').addEventListener('change', async () => {
    const input = $<HTMLInputElement>('open-file');
    const f = input.files?.[0];
    if (f) await openCheckpoint(new Uint8Array(await f.arrayBuffer()), f.name);
    input.value = '';
  });
  // A file dropped on the page opens as a checkpoint, as "Open a checkpoint…" does (except on the
  // controls that take files of their own: the training text, the fine-tuning data, an adapter).
  document.addEventListener('dragover', (ev) => {
    if (ev.dataTransfer?.types.includes('Files')) ev.preventDefault();
  });
  document.addEventListener('drop', (ev) => {
    const f = ev.dataTransfer?.files[0];
    if (!f || (ev.target instanceof HTMLInputElement && ev.target.type === 'file')) return;
    ev.preventDefault();
    if (running !== null) {
      status(
        `Not opened ${f.name}: the model is busy (pause or stop it first). The current model is unchanged.`,
        'error',
      );
      return;
    }
    void f.arrayBuffer().then((b) => openCheckpoint(new Uint8Array(b), f.name));
  });
  document.getElementById('load-pretrained')?.addEventListener('click', () => void loadPretrained());

  finetune = wireFinetune(
    () => session,
    () => (model === null ? 'none' : running === null ? 'ready' : 'busy'),
  );
  try {
    gpuAdapter = await detectGpu();
    await applyChoice();
    status('Engine loaded.'); // the backend's line says which and why, once
    if (!(await tryRestore())) await onCorpusSource();
    onTokenizerChoice(); // a reload may keep the radios' state
    refreshButtons();
    const c = await session.call('calibrate', {});
    gflops = c.gflops;
    describePreset();
    document.body.dataset['ready'] = 'true';
  } catch (e) {
    status(`The engine failed to load: ${e instanceof Error ? e.message : String(e)}`, 'error');
  }
}
