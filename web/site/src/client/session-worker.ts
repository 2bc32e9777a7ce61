// The playground's training worker: one model, trained on WebAssembly (the C++ engine) or on
// WebGPU (the engine's program run by the WGSL executor), sampled, inspected, saved.
//
// The engine is always here: it owns the model's definition, its seeded initialisation, the data
// loader and the LR schedule. On WebGPU it hands over its train program and weights, then
// supplies every batch and learning rate (so a WebGPU run sees exactly the batches a CPU run
// would); the GPU's weights come back into the engine (`syncFromGpu`) before anything that reads
// them on the CPU: validation, samples, inspection, saving.
//
// A classic worker (astro.config.mjs sets Vite's worker format to iife), because the engine's
// loader uses importScripts.
import {
  Engine,
  EngineError,
  LoadedModule,
  loadModule,
  type StepEvents,
  type TrainedTokenizer,
} from '@posttrainllm/engine';
import {
  copyToEngine,
  engineTensors,
  type Executor,
  type StepLoss,
  WebGPUBackend,
  WebGPUGenerator,
  WebGPUInspector,
  WebGPUTrainer,
} from '@posttrainllm/webgpu';
import type {
  Backend,
  InspectResult,
  Method,
  Methods,
  ModelSummary,
  Reply,
  RunSettings,
  RunState,
  RunStep,
  TokenizerChoice,
  TokenizerSummary,
  WorkerEvent,
} from './protocol.js';
import { kernelSource } from './kernels.js';
import * as autosave from './autosave.js';
import { pushThinned, SAVED_STEPS } from './thin.js';
import defaults from '../generated/defaults.json';

const scope = self as unknown as DedicatedWorkerGlobalScope;
const base = new URL(import.meta.env.BASE_URL, scope.location.href);

let module: LoadedModule | null = null;
let engine: Engine | null = null;
let backend: Backend = 'wasm';
let corpus: { bytes: Uint8Array; info: RunState['corpus'] } | null = null;
// The training text's autosaved file, once written for the current text (null: not yet).
let corpusSaved: autosave.SavedMeta['corpus'] | null = null;
let state: RunState | null = null;
// The BPE tokenizer for the next new run: trained on `corpus`, kept until the corpus or the
// vocabulary size asked for changes (training one on a megabyte takes seconds).
let bpe: { asked: number; trained: TrainedTokenizer; seconds: number; corpus: string } | null = null;
// The GPU side: a backend holding the weights (and moments), the train program once training
// starts there, and the inference programs (generate, inspect) on the same weights.
interface GpuState {
  be: WebGPUBackend;
  adapter: string;
  train: { exec: Executor; trainer: WebGPUTrainer; batch: number; onLoss: (r: StepLoss) => void } | null;
  generator: WebGPUGenerator | null;
  inspector: WebGPUInspector | null;
  dirty: boolean; // the GPU's weights are newer than the engine's
}
let gpu: GpuState | null = null;
let abort: AbortController | null = null;
// The step of the last autosave of the run in memory (null: none yet), and why the model in
// memory is not a good state when training diverged: nothing saves or exports it then, so the
// autosave in OPFS stays the last good checkpoint.
let savedStep: number | null = null;
let diverged: string | null = null;

function refuseDiverged(what: string): void {
  if (diverged) throw new EngineError(`${what}: ${diverged}`, 'worker');
}

function lastGood(): string {
  return savedStep !== null
    ? `the last good autosave is step ${savedStep}: reload the page to continue from it`
    : 'this run has no autosave: start a new run';
}

const needEngine = (): Engine => {
  if (!engine) throw new EngineError('no model yet: create one or open a checkpoint', 'worker');
  return engine;
};
const needModule = (): LoadedModule => {
  if (!module) throw new EngineError('the engine is not loaded', 'worker');
  return module;
};
const yieldNow = () => new Promise<void>((r) => setTimeout(r, 0));

async function summary(): Promise<ModelSummary> {
  const e = needEngine();
  return { info: await e.info(), backend, build: e.build, ...(gpu ? { adapter: gpu.adapter } : {}) };
}

function replaceEngine(next: Engine): void {
  dropGpu();
  diverged = null;
  engine?.dispose();
  engine = next;
}

// ---------------------------------------------------------------------------------------------
// WebGPU

function dropGpu(): void {
  if (!gpu) return;
  gpu.train?.exec.destroy();
  gpu.generator?.destroy();
  gpu.inspector?.destroy();
  gpu.be.destroy();
  gpu.be.device.destroy();
  gpu = null;
}

/** A WebGPU device with the limits and features the kernels need. */
async function gpuDevice(): Promise<{ device: GPUDevice; adapter: string }> {
  const nav = scope.navigator as Navigator & { gpu?: GPU };
  if (!nav.gpu) throw new EngineError('WebGPU is not available in this browser', 'webgpu');
  const adapter = await nav.gpu.requestAdapter({ powerPreference: 'high-performance' });
  if (!adapter) throw new EngineError('no WebGPU adapter: the browser offers WebGPU but found no usable GPU', 'webgpu');
  const device = await adapter.requestDevice({
    requiredLimits: WebGPUBackend.requiredLimits(adapter),
    requiredFeatures: WebGPUBackend.requiredFeatures(adapter),
  });
  const a = adapter.info;
  return { device, adapter: [a.vendor, a.architecture, a.description].filter((x) => x).join(' ') || 'WebGPU adapter' };
}

/** A WebGPU device holding the engine's current weights and AdamW moments. */
async function ensureGpu(): Promise<GpuState> {
  if (gpu) return gpu;
  const e = needEngine();
  const { device, adapter } = await gpuDevice();
  const be = new WebGPUBackend(device, kernelSource());
  be.loadWeights(engineTensors(e));
  gpu = { be, adapter, train: null, generator: null, inspector: null, dirty: false };
  return gpu;
}

/**
 * The train program on the GPU, from the engine's current state. Each step's loss goes to
 * `gpu.train.onLoss` (set by the run that trains now).
 */
async function startGpu(progress: (message: string) => void): Promise<NonNullable<GpuState['train']>> {
  const e = needEngine();
  const info = await e.info();
  if (gpu?.train && gpu.train.batch === info.train.batch) return gpu.train;
  if (gpu?.train) {
    await syncFromGpu();
    dropGpu();
  }
  progress('Preparing the GPU: device, weights, training program…');
  const g = await ensureGpu();
  const program = JSON.stringify(await e.exportProgram('train'));
  // Compiling the kernels is most of a first start (seconds, more on a slow or emulated GPU).
  g.be.onPipelineProgress = (ready, total) => progress(`Compiling GPU kernels… ${ready}/${total}`);
  let exec: Executor;
  try {
    exec = await g.be.load(program);
  } finally {
    g.be.onPipelineProgress = null;
  }
  progress('Running the first GPU step…');
  const trainer = new WebGPUTrainer(
    exec,
    { readEvery: 1, onLoss: (r) => g.train?.onLoss(r), seed: info.train.seed },
    info.step,
  );
  g.train = { exec, trainer, batch: info.train.batch, onLoss: () => {} };
  return g.train;
}

/**
 * Brings the GPU's weights and moments back into the engine, tensor by tensor, after every loss
 * the GPU computed has been recorded (the engine already holds the data order and the history).
 */
async function syncFromGpu(): Promise<void> {
  if (!gpu || !gpu.train || !gpu.dirty) return;
  await gpu.train.trainer.flush();
  await copyToEngine(needEngine(), gpu.be, gpu.train.trainer.step);
  gpu.dirty = false;
}

/**
 * The losses of GPU steps as they come back: each is recorded by the engine (history, elapsed
 * time, divergence) and reported as the step's metrics. `lrs` holds the learning rate of each
 * step in flight; `check()` throws the engine's divergence error once one was refused.
 */
function gpuLosses(engine: Engine, exec: Executor, t0: number, startElapsed: number, report: (m: RunStep) => void) {
  const lrs = new Map<number, number>();
  let failure: unknown = null; // the engine refused a step's loss (training diverged)
  let last = performance.now(); // a step's time runs from the previous loss (the first: from now)
  const onLoss = (r: StepLoss) => {
    if (failure) return;
    const now = performance.now();
    const seconds = (now - last) / 1000;
    last = now;
    try {
      engine.recordStep({ step: r.step, loss: r.loss, gradNorm: r.gradNorm, seconds });
    } catch (err) {
      failure = err;
      return;
    }
    const tokens = exec.tensor('tokens').info.shape.reduce((a, b) => a * b, 1);
    report({
      step: r.step,
      loss: r.loss,
      lr: lrs.get(r.step) ?? 0,
      grad_norm: r.gradNorm,
      tokens,
      seconds,
      tokens_per_s: seconds > 0 ? tokens / seconds : 0,
      elapsed_s: startElapsed + (now - t0) / 1000,
    });
    lrs.delete(r.step);
  };
  const check = () => {
    if (failure) throw failure;
  };
  return { lrs, onLoss, check };
}

// ---------------------------------------------------------------------------------------------
// Training

async function train(id: number, settings: RunSettings, signal: AbortSignal): Promise<Methods['train']['result']> {
  const e = needEngine();
  if (!corpus) throw new EngineError('no corpus: choose TinyShakespeare, upload a .txt or load a dataset', 'worker');
  if (!state) throw new EngineError('no run: create a model first', 'worker');
  state.settings = {
    ...state.settings,
    steps: settings.steps,
    lr: settings.lr,
    schedule: settings.schedule,
    evalEvery: settings.evalEvery,
    sampleEvery: settings.sampleEvery,
    autosaveEvery: settings.autosaveEvery,
  };
  const s = state.settings;
  // The engine's training loop decides what follows each step (validation, sample, save) and
  // keeps the loss history; this worker acts on its events.
  await e.updateTrainConfig({
    steps: s.steps,
    lr: s.lr,
    schedule: s.schedule,
    eval_every: s.evalEvery,
    sample_every: s.sampleEvery,
  });
  e.loopOptions({ sampleAtEnd: true, saveEvery: s.autosaveEvery });
  const emit = (ev: WorkerEvent) => post({ id, ...ev } as Reply);
  let step = (await e.info()).step;
  const startElapsed = state.steps.at(-1)?.elapsed_s ?? 0;
  const t0 = performance.now();
  const record = (m: RunStep) => {
    state!.steps = pushThinned(state!.steps, m, (p) => p.step, SAVED_STEPS);
    emit({ event: 'step', data: m });
  };

  const act = async (at: number, ev: StepEvents) => {
    if (ev.evaluate) {
      await syncFromGpu();
      const v = await e.validationLoss(); // recorded in the engine's history with the step's train loss
      const point = { step: at, ...v };
      state!.evals.push(point);
      emit({ event: 'eval', data: point, heapBytes: needModule().heapBytes() });
    }
    if (ev.sample) {
      await syncFromGpu();
      const r = await e.generate('\n', { maxTokens: 160, temperature: 0.8, topK: 40, seed: at });
      const point = { step: at, text: r.text };
      state!.samples.push(point);
      emit({ event: 'sample', data: point });
    }
    // Autosave 0 turns the saves off (the engine also saves after each validation and at the end).
    // A failed save (a full quota, a storage error) does not stop the run: the page says so and
    // the previous autosave stays the one a reload restores; the next save tries again.
    if (ev.save && s.autosaveEvery > 0) {
      try {
        const bytes = await save();
        emit({ event: 'autosave', data: { step: at, bytes } });
      } catch (err) {
        emit({ event: 'autosaveFailed', data: { step: at, reason: saveFailure(err), kept: savedStep } });
      }
    }
  };

  if (backend === 'webgpu') {
    const run = await startGpu((message) => emit({ event: 'progress', data: { message } }));
    const t = run.trainer;
    const losses = gpuLosses(e, t.exec, t0, startElapsed, record);
    const lrs = losses.lrs;
    run.onLoss = losses.onLoss;
    const flush = async () => {
      await t.flush();
      losses.check();
    };
    try {
      while (step < s.steps && !signal.aborted) {
        const b = await e.nextBatch();
        lrs.set(b.step, b.lr);
        t.trainStep(b.tokens, b.targets, b.lr);
        gpu!.dirty = true;
        step = t.step;
        const ev = e.eventsAfter(step);
        if (ev.evaluate || ev.sample || (ev.save && s.autosaveEvery > 0)) {
          // Every loss up to this step recorded (the validation's history point carries it), then act.
          await flush();
          await act(step, ev);
        } else if (step % 4 === 0) {
          // At most a few steps in flight: the losses arrive in order, and a deep queue would make
          // "pause" lag behind the button.
          await flush();
        } else losses.check();
        await yieldNow(); // lets an "abort" message in
      }
      await flush();
    } finally {
      run.onLoss = () => {};
    }
  } else {
    while (step < s.steps && !signal.aborted) {
      const [m] = await e.train(1);
      if (!m) break;
      const { events, ...metrics } = m;
      record({ ...metrics, elapsed_s: startElapsed + (performance.now() - t0) / 1000 });
      step = m.step;
      await act(step, events);
      await yieldNow(); // lets an "abort" message in
    }
  }
  await syncFromGpu();
  return {
    step,
    reason: signal.aborted ? 'aborted' : 'done',
    backend,
    ...(backend === 'webgpu' && gpu ? { adapter: gpu.adapter } : {}),
  };
}

/**
 * Autosave to the origin-private file system: checkpoint with moments, run state, corpus. All or
 * nothing (autosave.ts): a save that fails leaves the previous autosave as it was.
 */
async function save(): Promise<number> {
  refuseDiverged('not saved');
  await syncFromGpu();
  const e = needEngine();
  const ckpt = await e.exportCheckpoint({ optimizer: true });
  const step = (await e.info()).step;
  if (!corpusSaved && corpus) corpusSaved = (await autosave.writeCorpus(corpus.bytes)) ?? null;
  state!.savedAt = new Date().toISOString();
  await autosave.writeRun(
    { variant: module?.build.variant, state, ...(corpusSaved && corpus ? { corpus: corpusSaved } : {}) },
    ckpt,
  );
  savedStep = step;
  return ckpt.byteLength;
}

/** Why a save failed, in words: a full quota says so (the browser's own message follows). */
function saveFailure(err: unknown): string {
  const name = err instanceof Error ? err.name : '';
  const message = (err instanceof Error ? err.message : String(err)).replace(/\.$/, '');
  if (name === 'QuotaExceededError')
    return `the browser's storage for this site is full (QuotaExceededError: ${message})`;
  return name && name !== 'Error' ? `${name}: ${message}` : message;
}

// ---------------------------------------------------------------------------------------------
// The tokenizer of a new run

/**
 * The choice's tokenizer: bytes, or a BPE tokenizer trained on the current corpus's training part
 * (the bytes before the engine's validation split: the held-out text stays unseen, so its bits
 * per byte are honest), once per corpus and size, by the engine's `ptl tokenizer train` (the same
 * file native ptl makes of those bytes).
 */
async function prepareTokenizer(
  choice: TokenizerChoice,
  progress: (message: string) => void,
): Promise<TokenizerSummary> {
  if (choice.kind === 'bytes') return { type: 'byte', vocabSize: 256, merges: 0, seconds: 0, corpus: '' };
  if (!corpus)
    throw new EngineError(
      'no corpus to train a tokenizer on: choose TinyShakespeare, upload a .txt or load a dataset',
      'worker',
    );
  const n = choice.vocabSize;
  if (!(Number.isInteger(n) && n >= 257 && n <= 65536))
    throw new EngineError(`the BPE vocabulary must be a whole number from 257 to 65,536 (got ${n})`, 'worker');
  if (!bpe || bpe.asked !== n) {
    // The engine's split (engine/data.cpp): the last floor(10%) bytes validate.
    const train = corpus.bytes.subarray(0, corpus.bytes.length - Math.floor(corpus.bytes.length * 0.1));
    const mb = (train.length / 1e6).toFixed(2);
    progress(`Training a BPE tokenizer of ${n.toLocaleString()} tokens on ${corpus.info.name} (${mb} MB to train on)…`);
    const t0 = performance.now();
    const trained = needModule().trainTokenizer(train, n);
    bpe = { asked: n, trained, seconds: (performance.now() - t0) / 1000, corpus: corpus.info.name };
  }
  return {
    type: 'bpe',
    vocabSize: bpe.trained.vocab_size,
    merges: bpe.trained.merges,
    seconds: bpe.seconds,
    corpus: bpe.corpus,
  };
}

// ---------------------------------------------------------------------------------------------
// The rest of the methods

// One handler per method of the protocol (protocol.ts: Methods), typed by it: each takes the call's
// params (and the call's id and abort signal) and returns its result. "abort" never comes here:
// the message listener answers it at once.
interface Call {
  id: number;
  signal: AbortSignal;
}
type Handler<M extends Method> = (params: Methods[M]['params'], call: Call) => Promise<Methods[M]['result']>;

const handlers: { [M in Exclude<Method, 'abort'>]: Handler<M> } = {
  load: async (p) => {
    if (module) return module.build;
    module = await loadModule({ variant: p.variant, buildDir: new URL('wasm/', base).href, poolSize: p.threads });
    return module.build;
  },
  create: async (p, { id }) => {
    const s = p.settings;
    let tokenizer: string | null = null;
    if (p.tokenizer.kind === 'bpe') {
      await prepareTokenizer(p.tokenizer, (message) => post({ id, event: 'progress', data: { message } }));
      tokenizer = bpe!.trained.json;
    }
    // The settings the page does not show are those of `ptl train` with no options too.
    const next = await Engine.create(
      {
        preset: p.preset,
        train: {
          batch: s.batch,
          steps: s.steps,
          lr: s.lr,
          schedule: s.schedule,
          dropout: s.dropout,
          seed: s.seed,
          warmup: defaults.warmup,
          min_lr_frac: defaults.min_lr_frac,
          weight_decay: defaults.weight_decay,
        },
        // The model reads the tokenizer's tokens; its vocabulary is the tokenizer's.
        ...(tokenizer ? { tokenizer } : {}),
      },
      needModule(),
    );
    replaceEngine(next);
    savedStep = null;
    if (corpus) await next.setCorpus(corpus.bytes);
    state = {
      settings: { ...s },
      preset: p.preset,
      backend,
      corpus: corpus?.info ?? { name: '', bytes: 0 },
      steps: [],
      evals: [],
      samples: [],
    };
    return summary();
  },
  open: async (p) => {
    // Validate by loading into a fresh engine: a bad file leaves the current model untouched.
    const next = await Engine.fromCheckpoint(p.bytes, needModule(), p.name);
    replaceEngine(next);
    savedStep = null;
    if (corpus) await next.setCorpus(corpus.bytes);
    const info = await next.info();
    state = {
      settings: {
        steps: Math.max(info.train.steps, info.step),
        batch: info.train.batch,
        lr: info.train.lr,
        schedule: info.train.schedule,
        dropout: info.train.dropout ?? 0,
        seed: info.train.seed,
        evalEvery: 50,
        sampleEvery: 100,
        autosaveEvery: 50,
      },
      preset: 'custom',
      backend,
      corpus: corpus?.info ?? { name: '', bytes: 0 },
      steps: [],
      evals: [],
      samples: [],
    };
    return { ...(await summary()), state };
  },
  prepareTokenizer: async (p, { id }) =>
    prepareTokenizer(p.choice, (message) => post({ id, event: 'progress', data: { message } })),
  setCorpus: async (p) => {
    if (engine) await engine.setCorpus(p.bytes);
    corpus = { bytes: p.bytes, info: p.info };
    corpusSaved = null;
    bpe = null; // trained on the previous text
    if (state) state.corpus = p.info;
    const info = engine ? await engine.info() : null;
    // Without a model yet, the engine's split (engine/data.cpp): the last floor(10%) bytes validate.
    const val = Math.floor(p.bytes.length * 0.1);
    return info?.corpus ?? { train_bytes: p.bytes.length - val, val_bytes: val };
  },
  setBackend: async (p) => {
    if (p.backend !== backend) {
      await syncFromGpu();
      dropGpu();
      backend = p.backend;
      if (state) state.backend = backend;
    }
    return engine ? summary() : null;
  },
  train: async (p, { id, signal }) => {
    refuseDiverged('cannot train further');
    try {
      return await train(id, p.settings, signal);
    } catch (err) {
      const msg = err instanceof Error ? err.message : String(err);
      if (!/^training diverged at step/.test(msg)) throw err;
      // The weights in memory (and on the GPU) took the step that diverged: drop them from the
      // GPU and refuse every save and export, so that the autosave stays the last good state.
      dropGpu();
      diverged = `${msg}; ${lastGood()}`; // the engine's message suggests a lower learning rate
      throw new EngineError(diverged, 'worker');
    }
  },
  generate: async (p, { id, signal }) => {
    if (backend === 'webgpu') return generateOnGpu(id, p, signal);
    await syncFromGpu();
    const e = needEngine();
    const out = tokenEvents(e, id);
    const t0 = performance.now();
    let first = 0;
    let n = 0;
    const r = await e
      .generate(p.prompt, {
        maxTokens: p.maxTokens,
        temperature: p.temperature,
        topK: p.topK,
        topP: p.topP,
        seed: p.seed,
        mode: 'polling',
        signal,
        onToken: (tok) => {
          if (n++ === 0) first = performance.now() - t0;
          out.push(tok);
        },
      })
      .catch((err: unknown) => {
        if (signal.aborted) return null;
        throw err;
      });
    out.finish();
    return {
      text: r?.text ?? out.text(),
      tokens: n,
      seconds: (performance.now() - t0) / 1000,
      firstTokenSeconds: first / 1000,
    };
  },
  inspect: async (p) => {
    if (backend === 'webgpu') return inspectOnGpu(p.prompt);
    await syncFromGpu();
    return inspect(p.prompt);
  },
  exportCheckpoint: async (p) => {
    refuseDiverged('not exported');
    await syncFromGpu();
    return needEngine().exportCheckpoint({ optimizer: p.optimizer });
  },
  restore: async () => {
    // Everything is read and checked before the worker's state changes: a damaged autosave
    // leaves the worker as it was (no model), and the page says what is wrong with it.
    const saved = await autosave.readRun();
    if (!saved) return null;
    const st = (saved.meta as { state?: RunState }).state;
    if (!st || !Array.isArray(st.steps) || !st.settings || !st.corpus)
      throw new autosave.AutosaveError("the autosave's run state has no settings or metrics");
    let next: Engine;
    try {
      next = await Engine.fromCheckpoint(saved.checkpoint, needModule(), 'autosave.tinygpt');
    } catch (e) {
      throw new autosave.AutosaveError(
        `the autosave's checkpoint does not load (${e instanceof Error ? e.message : String(e)})`,
      );
    }
    const c = saved.corpus;
    try {
      if (c) await next.setCorpus(c);
    } catch (e) {
      next.dispose();
      throw e;
    }
    replaceEngine(next);
    if (c) {
      corpus = { bytes: c, info: st.corpus };
      corpusSaved = saved.meta.corpus ?? null;
      bpe = null;
    }
    state = st;
    // The checkpoint may be newer or older than the last metrics we wrote: keep what it holds.
    const step = (await next.info()).step;
    savedStep = step;
    st.steps = st.steps.filter((m) => m.step <= step);
    st.evals = (st.evals ?? []).filter((m) => m.step <= step);
    st.samples = (st.samples ?? []).filter((m) => m.step <= step);
    backend = st.backend;
    return { ...(await summary()), state: st, corpus: c ?? null };
  },
  clearAutosave: async () => {
    await autosave.clear();
    return null;
  },
  shutdown: async () => {
    // Parked pool threads wait in Atomics.wait, where a terminate() from the page only ends
    // them after the browser's forcible-termination delay; joining them here lets the worker
    // (and its nested pthread workers) close at once.
    dropGpu();
    engine?.dispose();
    engine = null;
    ft?.base.dispose();
    ft?.tuned.dispose();
    ft = null;
    gpt2 = null;
    if (module?.build.threads) module.setNumThreads(1);
    setTimeout(() => scope.close(), 0); // after this reply is posted
    return null;
  },
  calibrate: () => calibrate(),
  gpt2Open: async (p) => {
    const { engine: e, info } = await Engine.fromHuggingFace(p.files, needModule(), p.label);
    try {
      // The checkpoint ptl import-hf writes: fine-tuning starts from it as from any checkpoint.
      gpt2 = { checkpoint: await e.exportCheckpoint({ optimizer: false }), label: p.label };
      return { summary: info.summary, params: (await e.info()).param_count };
    } finally {
      e.dispose();
    }
  },
  ftStart: (p, { id, signal }) => ftStart(id, p, signal),
  ftCompare: async (p) => {
    if (!ft) throw new EngineError('fine-tune a model first (or load an adapter)', 'worker');
    const opts = { maxTokens: p.maxTokens, temperature: p.temperature, topK: p.topK, seed: p.seed };
    const base = await ft.base.generate(p.prompt, opts);
    const t0 = performance.now();
    const tuned = await ft.tuned.generate(p.prompt, opts);
    const tunedSeconds = (performance.now() - t0) / 1000;
    return { base: base.text, tuned: tuned.text, tunedTokens: tuned.ids.length, tunedSeconds };
  },
  ftExportAdapter: async () => {
    if (!ft) throw new EngineError('no fine-tuned model yet', 'worker');
    return ft.tuned.exportAdapter();
  },
  ftExportPeft: async (p) => {
    if (!ft) throw new EngineError('no fine-tuned model yet', 'worker');
    return ft.tuned.exportPeft(p.baseModel);
  },
  ftExportHf: async () => {
    if (!ft) throw new EngineError('no fine-tuned model yet', 'worker');
    return ft.tuned.exportHuggingFace();
  },
  ftExportModel: async () => {
    if (!ft) throw new EngineError('no fine-tuned model yet', 'worker');
    return ft.tuned.exportCheckpoint({ optimizer: false });
  },
  ftLoadAdapter: async (p) => {
    // Onto the base the last fine-tuning started from (adapters name their base's sha256),
    // else the current model. A refused adapter leaves the current pair as it was.
    const baseBytes = ft?.baseBytes ?? (await currentWeights());
    const tuned = await Engine.fromCheckpoint(baseBytes, needModule(), 'base.tinygpt');
    try {
      await tuned.loadAdapter(p.bytes, p.name);
    } catch (e) {
      tuned.dispose();
      throw e;
    }
    const base = ft?.base ?? (await Engine.fromCheckpoint(baseBytes, needModule(), 'base.tinygpt'));
    ft?.tuned.dispose();
    ft = { base, tuned, baseBytes, data: ft?.data ?? null };
    return ftSummary(null, null);
  },
};

async function handle(id: number, method: Method, params: unknown, signal: AbortSignal): Promise<unknown> {
  if (method === 'abort' || !Object.hasOwn(handlers, method))
    throw new EngineError(`unknown method '${String(method)}'`, 'worker');
  const handler = handlers[method] as (params: unknown, call: Call) => Promise<unknown>;
  return handler(params, { id, signal });
}

// ---------------------------------------------------------------------------------------------
// Fine-tuning: a base and its fine-tuned copy side by side, both from the same checkpoint bytes.

let ft: {
  base: Engine;
  tuned: Engine;
  baseBytes: Uint8Array;
  data: Methods['ftStart']['params']['data'] | null;
} | null = null;

// The GPT-2 folder the Fine-tune panel was given (gpt2Open), as its checkpoint.
let gpt2: { checkpoint: Uint8Array; label: string } | null = null;

async function currentWeights(): Promise<Uint8Array> {
  refuseDiverged('cannot fine-tune this model');
  await syncFromGpu();
  return needEngine().exportCheckpoint({ optimizer: false });
}

async function ftSummary(before: number | null, after: number | null): Promise<Methods['ftStart']['result']> {
  const lora = await ft!.tuned.loraInfo();
  const info = await ft!.base.info();
  return {
    step: (await ft!.tuned.info()).step,
    lora,
    base_params: info.param_count,
    base_val_loss: before,
    tuned_val_loss: after,
  };
}

async function ftStart(
  id: number,
  p: Methods['ftStart']['params'],
  signal: AbortSignal,
): Promise<Methods['ftStart']['result']> {
  if (p.gpt2 && !gpt2) throw new EngineError('choose a GPT-2 model folder first', 'worker');
  const baseBytes = p.base ?? (p.gpt2 ? gpt2!.checkpoint : await currentWeights());
  const m = needModule();
  const base = await Engine.fromCheckpoint(baseBytes, m, 'base.tinygpt');
  const tuned = await Engine.fromCheckpoint(baseBytes, m, 'base.tinygpt');
  try {
    const feed = async (e: Engine) =>
      p.data.kind === 'jsonl' ? e.setSftData(p.data.bytes, p.data.name) : e.setCorpus(p.data.bytes);
    await feed(tuned);
    await feed(base);
    await tuned.startFinetune({ steps: p.steps, lr: p.lr, schedule: 'cosine', seed: p.seed, lora: p.lora });
    // The adapter (or model) records what it was trained on: this file, not the base run's data.
    // The panel compares the held-out loss before and after: the engine's loop validates at the
    // last step only (eval_every 0), not at the base run's interval.
    await tuned.updateTrainConfig({ data_path: p.data.name, eval_every: 0 });
  } catch (e) {
    base.dispose();
    tuned.dispose();
    throw e;
  }
  ft?.base.dispose();
  ft?.tuned.dispose();
  ft = { base, tuned, baseBytes, data: p.data };
  const before = (await base.validationLoss()).loss;
  const onGpu = backend === 'webgpu' && p.lora !== null;
  const report = (metrics: RunStep) => post({ id, event: 'ftstep', data: metrics });
  // The engine's events after each step: the run ends at its last step (or an abort), where the
  // loop says to validate.
  let after: number | null = null;
  const act = async (ev: StepEvents, sync: () => Promise<void>) => {
    if (ev.evaluate) {
      await sync();
      after = (await tuned.validationLoss()).loss;
    }
  };
  if (onGpu) await ftTrainOnGpu(tuned, signal, report, act);
  else {
    while (!signal.aborted) {
      const [step] = await tuned.train(1);
      if (!step) break;
      const { events, ...metrics } = step;
      report(metrics);
      await act(events, async () => {});
      if (events.last) break;
      await yieldNow();
    }
  }
  after ??= (await tuned.validationLoss()).loss; // stopped before the last step
  return { ...(await ftSummary(before, after)), backend: onGpu ? 'webgpu' : 'wasm' };
}

/**
 * LoRA on WebGPU: the fine-tuning engine's train program (frozen base, adapters, and for SFT
 * the loss mask) on a GPU, fed by the engine's batches and schedule; each step's loss recorded by
 * the engine (history, divergence); the trained adapters and their moments then go back into the
 * engine tensor by tensor, so validation, sampling and saving see them.
 */
async function ftTrainOnGpu(
  tuned: Engine,
  signal: AbortSignal,
  report: (metrics: RunStep) => void,
  act: (ev: StepEvents, sync: () => Promise<void>) => Promise<void>,
): Promise<void> {
  const { device } = await gpuDevice();
  const be = new WebGPUBackend(device, kernelSource());
  try {
    be.loadWeights(engineTensors(tuned));
    const exec = await be.load(JSON.stringify(await tuned.exportProgram('train')));
    const losses = gpuLosses(tuned, exec, performance.now(), 0, report);
    const lrs = losses.lrs;
    const info = await tuned.info();
    // The run's seed draws the dropout masks (LoRA dropout included), as on the engine.
    const trainer = new WebGPUTrainer(exec, { readEvery: 1, onLoss: losses.onLoss, seed: info.train.seed }, info.step);
    const flush = async () => {
      await trainer.flush();
      losses.check();
    };
    let synced = false;
    const sync = async () => {
      if (synced) return;
      await flush();
      await copyToEngine(tuned, be, trainer.step);
      synced = true;
    };
    while (!signal.aborted) {
      const b = await tuned.nextBatch();
      lrs.set(b.step, b.lr);
      if (b.mask) exec.setInput('loss_mask', b.mask);
      trainer.trainStep(b.tokens, b.targets, b.lr);
      synced = false;
      const ev = tuned.eventsAfter(b.step);
      await act(ev, sync);
      if (ev.last) break;
      if (trainer.step % 4 === 0) await flush();
      else losses.check();
      await yieldNow();
    }
    await sync();
    exec.destroy();
  } finally {
    be.destroy();
    device.destroy();
  }
}

// ---------------------------------------------------------------------------------------------
// Sampling and inspection on the GPU, with the engine's generate / window / inspect programs
// over the weights the GPU already holds (the same kernels as training, plus the KV cache ones).

/** The prompt's last ctx tokens, as the engine crops it (an empty prompt is a newline). */
async function promptTokens(prompt: string): Promise<number[]> {
  const e = needEngine();
  const ctx = (await e.info()).model.ctx;
  return [...e.encode(prompt === '' ? '\n' : prompt)].slice(-ctx);
}

/**
 * Posts sampled tokens as 'token' events: each token's bytes (asked of the engine once per id)
 * through a streaming UTF-8 decoder, so a character split across tokens arrives whole, with the
 * ids of every token it took.
 */
function tokenEvents(e: Engine, id: number) {
  const utf8 = new TextDecoder('utf-8');
  const bytesOf = new Map<number, Uint8Array>();
  let ids: number[] = [];
  let all = '';
  const send = (text: string) => {
    all += text;
    post({ id, event: 'token', data: { ids, text } });
    ids = [];
  };
  return {
    push(tok: number): void {
      let b = bytesOf.get(tok);
      if (!b) bytesOf.set(tok, (b = e.decode([tok])));
      ids.push(tok);
      const text = utf8.decode(b, { stream: true });
      if (text) send(text);
    },
    /** The bytes held back at the end (an incomplete character), if any. */
    finish(): void {
      const tail = utf8.decode();
      if (tail || ids.length) send(tail);
    },
    text: () => all,
  };
}

/** Each token's bytes, for the page's labels. */
function piecesOf(e: Engine, tokens: ArrayLike<number>): number[][] {
  return Array.from(tokens, (t) => [...e.decode([t])]);
}

async function generateOnGpu(
  id: number,
  p: Methods['generate']['params'],
  signal: AbortSignal,
): Promise<Methods['generate']['result']> {
  const g = await ensureGpu();
  const e = needEngine();
  if (!g.generator)
    g.generator = await WebGPUGenerator.create(
      g.be,
      JSON.stringify(await e.exportProgram('generate')),
      JSON.stringify(await e.exportProgram('window')),
      JSON.stringify(await e.exportProgram('prefill')), // the prompt 32 tokens at a time
    );
  const events = tokenEvents(e, id);
  const t0 = performance.now();
  let first = 0;
  let n = 0;
  await g.generator.generate(
    await promptTokens(p.prompt),
    { maxTokens: p.maxTokens, temperature: p.temperature, topK: p.topK, topP: p.topP, seed: p.seed },
    (tok) => {
      if (n++ === 0) first = performance.now() - t0;
      events.push(tok);
      return !signal.aborted;
    },
  );
  events.finish();
  return {
    text: events.text(),
    tokens: n,
    seconds: (performance.now() - t0) / 1000,
    firstTokenSeconds: first / 1000,
  };
}

async function inspectOnGpu(prompt: string): Promise<InspectResult> {
  const g = await ensureGpu();
  if (!g.inspector)
    g.inspector = await WebGPUInspector.create(g.be, JSON.stringify(await needEngine().exportProgram('inspect')));
  const tokens = await promptTokens(prompt);
  const ins = await g.inspector.inspect(tokens);
  const T = tokens.length;
  const e = needEngine();
  const top = WebGPUInspector.topK(ins, T - 1, 10).map((t) => ({
    token: t.token,
    prob: t.prob,
    piece: [...e.decode([t.token])],
  }));
  const attention = ins.probs.map((layer) =>
    Array.from({ length: ins.heads }, (_, h) => layer.subarray(h * T * T, (h + 1) * T * T)),
  );
  return { tokens, pieces: piecesOf(e, tokens), top, layers: ins.probs.length, heads: ins.heads, T, attention };
}

async function inspect(prompt: string): Promise<InspectResult> {
  const e = needEngine();
  const r = await e.inspect(prompt, { topK: 10 });
  return {
    tokens: [...r.tokens],
    pieces: piecesOf(e, r.tokens),
    top: r.top.map((t) => ({ token: t.token, prob: t.prob, piece: [...e.decode([t.token])] })),
    layers: r.layers,
    heads: r.heads,
    T: r.T,
    attention: r.maps,
  };
}

/**
 * The WebAssembly engine's speed on this machine, for the preset picker's time estimates: a few
 * steps of Tiny on a throwaway model, in GFLOP/s (6 x parameters x tokens, plus attention).
 */
async function calibrate(): Promise<{ gflops: number }> {
  const m = needModule();
  const e = await Engine.create({ preset: 'small', train: { batch: 8, steps: 4, seed: 1 } }, m);
  try {
    const text = new Uint8Array(8192);
    for (let i = 0; i < text.length; i++) text[i] = 97 + ((i * 7919) % 26);
    await e.setCorpus(text);
    const info = await e.info();
    await e.train(1); // first step allocates
    const t0 = performance.now();
    await e.train(3);
    const seconds = (performance.now() - t0) / 1000;
    const { n_layers: L, d_model: d, ctx: T } = info.model;
    const tokens = info.train.batch * T;
    const flops = 3 * tokens * (6 * info.param_count + 12 * L * T * d);
    return { gflops: flops / seconds / 1e9 };
  } finally {
    e.dispose();
  }
}

function post(msg: Reply, transfer: Transferable[] = []): void {
  scope.postMessage(msg, transfer);
}

let queue: Promise<void> = Promise.resolve();
scope.addEventListener('message', (ev: MessageEvent) => {
  const { id, method, params } = ev.data as { id: number; method: Method; params: unknown };
  if (method === 'abort') {
    abort?.abort();
    post({ id, ok: true, result: null });
    return;
  }
  queue = queue.then(async () => {
    abort = new AbortController();
    try {
      const result = await handle(id, method, params, abort.signal);
      post({ id, ok: true, result }, result instanceof Uint8Array ? [result.buffer] : []);
    } catch (e) {
      const message = e instanceof Error ? e.message : String(e);
      post({ id, ok: false, error: { name: e instanceof Error ? e.name : 'Error', message } });
    } finally {
      abort = null;
    }
  });
});
