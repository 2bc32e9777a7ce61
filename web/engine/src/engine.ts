// The posttrainllm WebAssembly engine, as a typed async API.
//
//   const engine = await Engine.create({ preset: "small", train: { steps: 50 } }, { buildDir });
//   await engine.setCorpus(text);
//   await engine.train(50, { onProgress: (m) => console.log(m.step, m.loss) });
//   const { text } = await engine.generate("ROMEO:", { maxTokens: 100, temperature: 0 });
//   const ckpt = await engine.exportCheckpoint();   // the native .tinygpt format
//   engine.dispose();
//
// The C API it wraps is wasm/api.cpp (docs/wasm.md). Every engine error (a bad config, a corrupt
// checkpoint, a corpus shorter than the context, ...) rejects with an EngineError carrying the
// engine's own message, and the engine stays usable.

import { memory64Instantiator } from './memory64.js';
import { type Variant } from './select.js';

/** An error reported by the engine (or by this wrapper about the engine). */
export class EngineError extends Error {
  /** The engine's message, exactly as the C++ engine wrote it. */
  readonly engineMessage: string;
  /** The API call that failed, e.g. "ptl_create". */
  readonly call: string;
  constructor(message: string, call: string) {
    super(message);
    this.name = 'EngineError';
    this.engineMessage = message;
    this.call = call;
  }
}

export interface ModelConfig {
  vocab_size: number;
  n_layers: number;
  d_model: number;
  n_heads: number;
  ctx: number;
  /** The MLP's GELU: "erf" (the exact form, the default; left out of a model's info) or "tanh" (GPT-2's). */
  gelu?: 'erf' | 'tanh';
}

export interface TrainConfig {
  batch: number;
  steps: number;
  lr: number;
  schedule: 'cosine' | 'constant';
  warmup: number;
  min_lr_frac: number;
  beta1: number;
  beta2: number;
  eps: number;
  weight_decay: number;
  grad_clip: number;
  /** The model's dropout rate in training (docs/model.md, "Dropout"); 0 = none. */
  dropout: number;
  seed: number;
  eval_every: number;
  eval_batches: number;
  sample_every: number;
  data_path: string;
  /** Where a resume with another `steps` stretched the cosine (docs/model.md); -1: none. */
  decay_from_step: number;
  decay_from_lr: number;
}

/** A fresh model: a preset (default "small") with optional overrides. */
export interface CreateConfig {
  preset?: string;
  model?: Partial<ModelConfig>;
  train?: Partial<TrainConfig>;
  /**
   * A tokenizer.json text (e.g. TrainedTokenizer.json): the model reads its tokens, and its
   * vocabulary is the tokenizer's (as `ptl train --tokenizer`). Without it the model reads bytes.
   */
  tokenizer?: string;
}

/** A byte-level BPE tokenizer trained on a text (LoadedModule.trainTokenizer). */
export interface TrainedTokenizer {
  /** Its tokenizer.json text, what CreateConfig.tokenizer takes and a checkpoint records. */
  json: string;
  /** Bytes, merged tokens and <|endoftext|>: below the size asked for when the text ran out of pairs. */
  vocab_size: number;
  merges: number;
  specials: { text: string; id: number }[];
}

/** What the engine's training loop says follows a step (engine/training_loop.h). */
export interface StepEvents {
  /** Validate now (validationLoss records it in the history). */
  evaluate: boolean;
  /** Generate a text sample now (every sample_every steps; at the last with sampleAtEnd). */
  sample: boolean;
  /** Save now: after a validation, at the last step, every saveEvery steps. */
  save: boolean;
  /** The run's last step (the train config's steps). */
  last: boolean;
}

export interface StepMetrics {
  step: number;
  loss: number;
  lr: number;
  grad_norm: number;
  tokens: number;
  seconds: number;
  tokens_per_s: number;
  elapsed_s: number;
  /** What follows this step. */
  events: StepEvents;
}

/** A step another executor ran (Engine.recordStep). */
export interface ExternalStep {
  /** Its 1-based number (NextBatch.step). */
  step: number;
  loss: number;
  gradNorm?: number;
  /** Its wall time, added to the run's elapsed time. */
  seconds?: number;
}

/** Extra events of the training loop (Engine.loopOptions). */
export interface LoopOptions {
  /** A sample at the run's last step too. */
  sampleAtEnd?: boolean;
  /** A save every N steps besides those after validations and at the end (0: none). */
  saveEvery?: number;
}

/** One tensor of the model's state (Engine.tensorNames). */
export interface StateTensor {
  name: string;
  shape: number[];
  /** AdamW moments are absent until a step runs in the engine or they are written. */
  present: boolean;
}

export interface EvalMetrics {
  /** Mean cross-entropy in nats per token (per byte for a byte-level model). */
  loss: number;
  tokens: number;
  /** The bytes those tokens stand for. */
  bytes: number;
  perplexity: number;
  /** Total nats / (bytes * ln 2): comparable between tokenizers. */
  bits_per_byte: number;
}

/** What identifies a model's tokenizer (its checkpoint's; docs/checkpoint-format.md). */
export interface TokenizerId {
  /** "byte": one token per byte; "bpe": byte-level BPE; "none": a model of ids that reads no text. */
  type: 'byte' | 'bpe' | 'none';
  vocab_size: number;
  /** BPE: sha256 of its canonical tokenizer.json, the identity adapters and SFT files record. */
  sha256?: string;
}

/** A model's tokenizer (Engine.tokenizerInfo). */
export interface TokenizerInfo extends TokenizerId {
  merges?: number;
  specials?: { text: string; id: number }[];
}

export interface EngineInfo {
  model: ModelConfig;
  train: TrainConfig;
  step: number;
  tokens_seen: number;
  elapsed_s: number;
  param_count: number;
  tokenizer: TokenizerId;
  corpus: { train_bytes: number; val_bytes: number; train_tokens: number; val_tokens: number } | null;
}

export interface BuildInfo {
  version: string;
  variant: Variant;
  simd: boolean;
  threads: boolean;
  memory64: boolean;
  heap_bytes: number;
  heap_max_bytes: number;
  /** Threads the kernels use (the calling thread included). */
  num_threads: number;
}

export interface TrainOptions {
  /** Called after every step with its metrics, the steps done in this call and the steps asked. */
  onProgress?: (metrics: StepMetrics, done: number, total: number) => void;
  /** Steps per engine call between two yields to the event loop (default 1). */
  stepsPerChunk?: number;
  /** Stops between two chunks; the steps done so far are kept. */
  signal?: AbortSignal;
}

export interface GenerateOptions {
  maxTokens?: number;
  /** 0 = greedy (argmax). */
  temperature?: number;
  topK?: number;
  topP?: number;
  seed?: number;
  /** Each new token (its id: a byte for a byte-level model) as it is produced; return false to stop early. */
  onToken?: (token: number) => boolean | void;
  /**
   * The text as it grows, decoded by the model's tokenizer: each call gets the new characters (a
   * character split across tokens comes once it is complete).
   */
  onText?: (text: string) => void;
  /**
   * "callback" (default): the engine's own generation loop, which calls onToken synchronously.
   * "polling": one token per engine call, yielding to the event loop in between.
   */
  mode?: 'callback' | 'polling';
  signal?: AbortSignal;
}

export interface GenerateResult {
  /** The generated bytes: the tokens decoded by the model's tokenizer (a byte-level model's tokens themselves). */
  tokens: Uint8Array;
  /** The generated token ids. */
  ids: Int32Array;
  /** The bytes as UTF-8 text (invalid sequences become U+FFFD). */
  text: string;
}

export type ProgramName = 'train' | 'eval' | 'forward' | 'generate' | 'prefill' | 'window' | 'inspect';

/**
 * LoRA adapters: rank r, scale alpha / r, on any of q, k, v, o, fc_in, fc_out, or qkv (one
 * adapter over q, k and v together: GPT-2's c_attn).
 */
export interface LoraOptions {
  rank: number;
  alpha: number;
  targets: string[];
}

/**
 * Fine-tuning from the current weights (Engine.startFinetune): a fresh schedule and moments.
 * What is left out is `ptl lora train`'s default (`ptl info --defaults`, "lora_train"): 500
 * steps, and with `lora` the peak rate 5e-3 and adapters of rank 2, alpha 8 on every projection,
 * so `{ lora: {} }` is that command's run; without `lora` every weight trains at `ptl sft`'s rate,
 * 3e-4, and adapters already on are first merged into the weights (the model sampled until then).
 */
export interface FinetuneOptions {
  steps?: number;
  lr?: number;
  schedule?: 'cosine' | 'constant';
  batch?: number;
  seed?: number;
  warmup?: number;
  /** Train LoRA adapters on a frozen base (a field left out: the default); without it every weight trains. */
  lora?: Partial<LoraOptions> | null;
}

/** One file of a model folder: its name in the folder and its bytes. */
export interface FolderFile {
  name: string;
  bytes: Uint8Array;
}

/** What Engine.fromHuggingFace read (the line `ptl import-hf` prints). */
export interface HfImportInfo {
  /** "GPT-2 with 2 layers, d 64, 4 heads, ctx 128, vocab 50257, gelu tanh, ... (model.safetensors, F32; tokenizer ...)" */
  summary: string;
  /** Whether the folder's tokenizer became the model's (it has exactly the model's ids). */
  tokenizer_stored: boolean;
}

export interface LoraInfo extends LoraOptions {
  enabled: boolean;
  trainable_params: number;
  base_sha256: string;
}

/** The batch of the next training step, for an executor outside the engine (Engine.nextBatch). */
export interface NextBatch {
  /** Input token ids (bytes for a byte-level model), [batch, seq] row-major. */
  tokens: Int32Array;
  /** The next token of each input (the tokens shifted by one), [batch, seq]. */
  targets: Int32Array;
  /** SFT: the loss weight of each position (1 on response bytes), [batch, seq]; absent otherwise. */
  mask?: Float32Array;
  batch: number;
  seq: number;
  /** The 1-based number of this step (optim.hparams[1] of the training program). */
  step: number;
  /** Its learning rate (optim.hparams[0]). */
  lr: number;
}

export interface InspectOptions {
  /** How many of the most likely next bytes to return (default 10). */
  topK?: number;
}

/** What the model computes on a prompt (Engine.inspect). */
export interface InspectResult {
  /** The token ids inspected: the prompt's last ctx tokens (a newline for an empty prompt); bytes for a byte-level model. */
  tokens: Int32Array;
  /** The most likely next tokens after the last one, most likely first (`byte` repeats the id). */
  top: { token: number; byte: number; prob: number }[];
  layers: number;
  heads: number;
  /** tokens.length */
  T: number;
  /** Every attention map, [layers, heads, T, T]: row i is position i's weights over positions 0..i (zeros after). */
  attention: Float32Array;
  /** maps[layer][head]: a [T, T] view of `attention`. */
  maps: Float32Array[][];
}

/** A JSON-serialised program (Program::to_json): the tensor table and the ops. */
export interface ProgramJson {
  name: string;
  tensors: unknown[];
  ops: unknown[];
  [key: string]: unknown;
}

// ---------------------------------------------------------------------------------------------
// The Emscripten module.

type Ptr = number | bigint;

/** The parts of the Emscripten module (wasm/api.cpp's exports and runtime helpers) we use. */
export interface PtlModule {
  HEAPU8: Uint8Array;
  wasmMemory?: WebAssembly.Memory;
  _malloc(size: Ptr): Ptr;
  _free(ptr: Ptr): void;
  UTF8ToString(ptr: Ptr): string;
  addFunction(fn: (...args: never[]) => unknown, sig: string): number;
  removeFunction(index: number): void;
  PThread?: { terminateAllThreads?: () => void };
  _ptl_last_error(): Ptr;
  _ptl_build_info(): Ptr;
  _ptl_set_num_threads(n: number): number;
  _ptl_create(config: Ptr): number;
  _ptl_create_from_checkpoint(bytes: Ptr, n: number, name: Ptr): number;
  _ptl_load_checkpoint(h: number, bytes: Ptr, n: number, name: Ptr): number;
  _ptl_free(h: number): number;
  _ptl_update_train_config(h: number, json: Ptr): number;
  _ptl_set_corpus(h: number, bytes: Ptr, n: number, valFraction: number): number;
  _ptl_info(h: number): Ptr;
  _ptl_train(h: number, steps: number): Ptr;
  _ptl_validation_loss(h: number): Ptr;
  _ptl_evaluate_text(h: number, bytes: Ptr, n: number): Ptr;
  _ptl_generate(h: number, prompt: Ptr, n: number, options: Ptr, onToken: Ptr): Ptr;
  _ptl_generate_start(h: number, prompt: Ptr, n: number, options: Ptr): number;
  _ptl_generate_next(h: number): number;
  _ptl_generate_stop(h: number): number;
  _ptl_export_checkpoint(h: number, withOptimizer: number): Ptr;
  _ptl_result_size(): number;
  _ptl_export_program(h: number, which: Ptr): Ptr;
  _ptl_next_batch(h: number): Ptr;
  _ptl_lr_at(h: number, step: number): number;
  _ptl_profile(h: number, enable: number): Ptr;
  _ptl_inspect(h: number, prompt: Ptr, n: number, topK: number): Ptr;
  _ptl_run_program(program: Ptr, inputs: Ptr, n: number): Ptr;
  _ptl_start_finetune(h: number, config: Ptr): number;
  _ptl_set_sft_data(h: number, bytes: Ptr, n: number, name: Ptr): number;
  _ptl_export_adapter(h: number): Ptr;
  _ptl_load_adapter(h: number, bytes: Ptr, n: number, name: Ptr): number;
  _ptl_lora_info(h: number): Ptr;
  _ptl_events_after(h: number, step: number): Ptr;
  _ptl_record_step(h: number, json: Ptr): Ptr;
  _ptl_loop_options(h: number, json: Ptr): number;
  _ptl_tensor_names(h: number): Ptr;
  _ptl_read_tensor(h: number, name: Ptr): Ptr;
  _ptl_write_tensor(h: number, name: Ptr, bytes: Ptr, n: number): number;
  _ptl_set_step(h: number, step: number): number;
  _ptl_model_tokenizer_info(h: number): Ptr;
  _ptl_model_tokenizer_json(h: number): Ptr;
  _ptl_model_encode(h: number, text: Ptr, n: number): Ptr;
  _ptl_model_decode(h: number, ids: Ptr, count: number): Ptr;
  _ptl_tokenizer_train(text: Ptr, n: number, vocabSize: number): number;
  _ptl_tokenizer_info(t: number): Ptr;
  _ptl_tokenizer_json(t: number): Ptr;
  _ptl_tokenizer_free(t: number): number;
  _ptl_folder_file(name: Ptr, bytes: Ptr, n: number): number;
  _ptl_folder_clear(): number;
  _ptl_create_from_hf(label: Ptr): Ptr;
  _ptl_export_peft(h: number, baseModel: Ptr): Ptr;
  _ptl_export_hf(h: number): Ptr;
}

/** The factory an Emscripten MODULARIZE build exports (createPtlEngine). */
export type ModuleFactory = (overrides: Record<string, unknown>) => Promise<PtlModule>;

export interface LoadOptions {
  /** Which build to load (default "simd-threads"); see select.ts to choose. */
  variant?: Variant;
  /**
   * The folder (Node: a path; browser: a URL) holding the variants' folders, i.e. build-wasm/
   * with build-wasm/<variant>/ptl_engine.{js,wasm}. Ignored when `factory` is given.
   */
  buildDir?: string;
  /** The folder (path or URL) of one variant's ptl_engine.js / .wasm; overrides buildDir. */
  moduleDir?: string;
  /** The module factory, when the host loaded ptl_engine.js itself (e.g. a <script> tag). */
  factory?: ModuleFactory;
  /**
   * Workers in the pthread pool (threaded builds). Default: hardware concurrency, 1..16. The
   * kernels then use poolSize threads (the calling thread and poolSize - 1 workers).
   */
  poolSize?: number;
  /** Initial heap in bytes (rounded up to 64 KiB); the heap still grows up to the build's maximum. */
  initialMemory?: number;
  /** Where the module prints (the engine prints nothing in normal use). */
  print?: (line: string) => void;
}

function isNode(): boolean {
  const p = (globalThis as { process?: { versions?: { node?: string } } }).process;
  return typeof p?.versions?.node === 'string';
}

export function hardwareConcurrency(): number {
  const nav = (globalThis as { navigator?: { hardwareConcurrency?: number } }).navigator;
  if (nav?.hardwareConcurrency) return nav.hardwareConcurrency;
  return 4;
}

async function nodeHardwareConcurrency(): Promise<number> {
  const os = await import('node:os');
  return typeof os.availableParallelism === 'function' ? os.availableParallelism() : os.cpus().length;
}

function joinPath(dir: string, name: string): string {
  return dir.endsWith('/') ? dir + name : dir + '/' + name;
}

/** Loads one build of the engine (one WebAssembly instance; many trainers can share it). */
export async function loadModule(options: LoadOptions = {}): Promise<LoadedModule> {
  const variant: Variant = options.variant ?? 'simd-threads';
  const node = isNode();
  const cores = node ? await nodeHardwareConcurrency() : hardwareConcurrency();
  const poolSize = Math.max(1, Math.min(16, Math.floor(options.poolSize ?? cores)));
  const overrides: Record<string, unknown> = { ptlPoolSize: poolSize };
  if (options.initialMemory) overrides['INITIAL_MEMORY'] = Math.ceil(options.initialMemory / 65536) * 65536;
  if (options.print) {
    overrides['print'] = options.print;
    overrides['printErr'] = options.print;
  }
  let factory = options.factory;
  const dir = options.moduleDir ?? (options.buildDir !== undefined ? joinPath(options.buildDir, variant) : undefined);
  if (!factory) {
    if (dir === undefined) throw new EngineError('loadModule: give buildDir, moduleDir or factory', 'load');
    const jsPath = joinPath(dir, 'ptl_engine.js');
    if (node) {
      const { createRequire } = await import('node:module');
      const { readFile } = await import('node:fs/promises');
      const path = await import('node:path');
      const abs = path.resolve(jsPath);
      const require = createRequire(abs);
      factory = require(abs) as ModuleFactory;
      // Hand over the binary ourselves: this Emscripten would otherwise try fetch() on a path.
      overrides['wasmBinary'] = await readFile(path.resolve(joinPath(dir, 'ptl_engine.wasm')));
      overrides['locateFile'] = (name: string) => path.resolve(dir, name);
    } else {
      const scope = globalThis as { importScripts?: (url: string) => void; createPtlEngine?: ModuleFactory };
      if (typeof scope.importScripts !== 'function')
        throw new EngineError(
          'loadModule: outside a classic worker, load ptl_engine.js yourself and pass `factory`',
          'load',
        );
      scope.importScripts(jsPath);
      if (!scope.createPtlEngine) throw new EngineError(`loadModule: ${jsPath} did not define createPtlEngine`, 'load');
      factory = scope.createPtlEngine;
      overrides['locateFile'] = (name: string) => joinPath(dir, name);
      overrides['mainScriptUrlOrBlob'] = jsPath;
    }
  }
  // The glue's promise never settles when our instantiateWasm fails: race it against the failure.
  let failInstantiate: (e: unknown) => void = () => {};
  const instantiateFailed = new Promise<never>((_, reject) => {
    failInstantiate = reject;
  });
  if (variant === 'memory64') {
    // The Memory64 glue needs the boundary adapter of memory64.ts (BigInt pointers).
    let binary = overrides['wasmBinary'] as Uint8Array | undefined;
    if (!binary) {
      if (dir === undefined)
        throw new EngineError('loadModule: the memory64 build needs moduleDir or buildDir', 'load');
      const res = await fetch(joinPath(dir, 'ptl_engine.wasm'));
      if (!res.ok)
        throw new EngineError(`loadModule: could not fetch ${joinPath(dir, 'ptl_engine.wasm')}: ${res.status}`, 'load');
      binary = new Uint8Array(await res.arrayBuffer());
    }
    overrides['instantiateWasm'] = memory64Instantiator(binary, (e) => failInstantiate(e));
  }
  let mod: PtlModule;
  try {
    mod = await Promise.race([factory(overrides), instantiateFailed]);
  } catch (e) {
    // The glue's Module is our overrides object: stop the worker threads it may have started.
    (overrides as { PThread?: { terminateAllThreads?: () => void } }).PThread?.terminateAllThreads?.();
    throw new EngineError(
      `could not start the ${variant} engine: ${e instanceof Error ? e.message : String(e)}`,
      'load',
    );
  }
  // Never more threads than the pool can serve: the LoadedModule sets poolSize before anything runs.
  return new LoadedModule(mod, poolSize);
}

/** One loaded engine module, with the marshalling between JavaScript and the C API. */
export class LoadedModule {
  build: BuildInfo;
  private readonly wide: boolean; // Memory64: pointers are BigInt
  private live = 0;
  private terminated = false;

  constructor(
    readonly mod: PtlModule,
    readonly poolSize: number,
  ) {
    // The kernels' thread count first: reading the build info starts the engine's thread pool,
    // at the hardware concurrency by default, and a pool wider than the module's workers aborts
    // (a host that asks for fewer threads than it has cores). A build without threads keeps 1.
    mod._ptl_set_num_threads(poolSize);
    // Memory64 is known from the build info; read it with a plain call first.
    const raw = mod._ptl_build_info();
    this.wide = typeof raw === 'bigint';
    this.build = JSON.parse(mod.UTF8ToString(raw)) as BuildInfo;
  }

  /** Threads the kernels use; returns the count in effect. Not while the engine computes. */
  setNumThreads(n: number): number {
    const got = this.mod._ptl_set_num_threads(Math.floor(n));
    if (got < 0) this.fail('ptl_set_num_threads');
    this.build = JSON.parse(this.mod.UTF8ToString(this.mod._ptl_build_info())) as BuildInfo;
    return got;
  }

  /** The current size of the WebAssembly heap in bytes. */
  heapBytes(): number {
    const info = JSON.parse(this.mod.UTF8ToString(this.mod._ptl_build_info())) as BuildInfo;
    return info.heap_bytes;
  }

  ptr(n: number): Ptr {
    return this.wide ? BigInt(n) : n;
  }
  addr(p: Ptr): number {
    return typeof p === 'bigint' ? Number(p) : p >>> 0;
  }
  heap(): Uint8Array {
    // The heap may have grown (and, with threads, on another thread): always take a fresh view.
    const mem = this.mod.wasmMemory;
    if (mem && mem.buffer.byteLength !== this.mod.HEAPU8.byteLength) return new Uint8Array(mem.buffer);
    return this.mod.HEAPU8;
  }
  lastError(): string {
    return this.mod.UTF8ToString(this.mod._ptl_last_error()) || 'unknown engine error';
  }
  fail(call: string): never {
    throw new EngineError(this.lastError(), call);
  }
  /** Copies bytes into the heap for the duration of fn. */
  withBytes<T>(bytes: Uint8Array | string, fn: (p: Ptr, n: number) => T): T {
    const data = typeof bytes === 'string' ? new TextEncoder().encode(bytes) : bytes;
    const p = this.mod._malloc(this.ptr(Math.max(1, data.length)));
    if (this.addr(p) === 0)
      throw new EngineError(`out of memory copying ${data.length} bytes into the engine`, 'malloc');
    try {
      this.heap().set(data, this.addr(p));
      return fn(p, data.length);
    } finally {
      this.mod._free(p);
    }
  }
  /** A NUL-terminated UTF-8 string in the heap for the duration of fn. */
  withString<T>(s: string, fn: (p: Ptr) => T): T {
    const enc = new TextEncoder().encode(s);
    const z = new Uint8Array(enc.length + 1);
    z.set(enc);
    return this.withBytes(z, (p) => fn(p));
  }
  text(p: Ptr, call: string): string {
    if (this.addr(p) === 0) this.fail(call);
    return this.mod.UTF8ToString(p);
  }
  json<T>(p: Ptr, call: string): T {
    return JSON.parse(this.text(p, call)) as T;
  }
  bytes(p: Ptr, call: string): Uint8Array {
    if (this.addr(p) === 0) this.fail(call);
    const n = this.mod._ptl_result_size();
    const a = this.addr(p);
    return this.heap().slice(a, a + n);
  }
  /** A files result of the C API (ptl_export_peft, ptl_export_hf): header {"files": [{name, size}]}, then their bytes. */
  files(p: Ptr, call: string): FolderFile[] {
    const bytes = this.bytes(p, call);
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    const headerLen = Number(view.getBigUint64(0, true));
    const header = JSON.parse(new TextDecoder().decode(bytes.subarray(8, 8 + headerLen))) as {
      files: { name: string; size: number }[];
    };
    let at = 8 + headerLen;
    return header.files.map((f) => {
      const out = { name: f.name, bytes: bytes.slice(at, at + f.size) };
      at += f.size;
      return out;
    });
  }
  /**
   * Runs a serialised program (usually one op) once on the CPU backend, as the native
   * `ptl_program_run kernel` does: `inputs` is a safetensors file whose tensors are copied into the
   * program's tensors of the same names; the result is a safetensors file of every tensor of the
   * program after the run. Needs no model: the C++ twin of a WebGPU kernel in the browser.
   */
  async runProgram(program: ProgramJson | string, inputs: Uint8Array): Promise<Uint8Array> {
    const text = typeof program === 'string' ? program : JSON.stringify(program);
    return this.withString(text, (jp) =>
      this.withBytes(inputs, (p, n) => this.bytes(this.mod._ptl_run_program(jp, p, n), 'ptl_run_program')),
    );
  }
  /**
   * Trains a byte-level BPE tokenizer on a text, as `ptl tokenizer train` does (the same file for
   * the same text): `vocabSize` counts the 256 bytes, the merged tokens and <|endoftext|>
   * (257..65,536). Synchronous: run it in a worker.
   */
  trainTokenizer(text: Uint8Array | string, vocabSize: number): TrainedTokenizer {
    if (!Number.isInteger(vocabSize))
      throw new EngineError(`vocabulary size ${vocabSize} is not an integer`, 'ptl_tokenizer_train');
    const t = this.withBytes(text, (p, n) => this.mod._ptl_tokenizer_train(p, n, vocabSize));
    if (t <= 0) this.fail('ptl_tokenizer_train');
    try {
      const info = this.json<Omit<TrainedTokenizer, 'json'>>(this.mod._ptl_tokenizer_info(t), 'ptl_tokenizer_info');
      const json = this.text(this.mod._ptl_tokenizer_json(t), 'ptl_tokenizer_json');
      return { json, vocab_size: info.vocab_size, merges: info.merges, specials: info.specials };
    } finally {
      this.mod._ptl_tokenizer_free(t);
    }
  }
  retain(): void {
    this.live++;
  }
  release(): void {
    this.live--;
  }
  get trainers(): number {
    return this.live;
  }
  /** Stops the pthread workers (lets Node exit). The module is unusable afterwards. */
  terminate(): void {
    if (this.terminated) return;
    this.terminated = true;
    this.mod.PThread?.terminateAllThreads?.();
  }
}

function yieldToEventLoop(): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, 0));
}

function abortError(signal: AbortSignal): EngineError {
  const reason: unknown = signal.reason;
  return new EngineError(reason instanceof Error ? reason.message : 'aborted', 'abort');
}

/** One model (weights, optimizer state, data, programs) in a loaded engine module. */
export class Engine {
  private handle: number;
  private disposed = false;

  private constructor(
    readonly module: LoadedModule,
    handle: number,
    private readonly ownsModule: boolean,
  ) {
    this.handle = handle;
    module.retain();
  }

  /** A fresh model from a config (preset + overrides), initialised from train.seed. */
  static async create(config: CreateConfig = {}, load: LoadOptions | LoadedModule = {}): Promise<Engine> {
    const [module, owns] = load instanceof LoadedModule ? [load, false] : [await loadModule(load), true];
    try {
      const h = module.withString(JSON.stringify(config), (p) => module.mod._ptl_create(p));
      if (h <= 0) module.fail('ptl_create');
      return new Engine(module, h, owns);
    } catch (e) {
      if (owns) module.terminate();
      throw e;
    }
  }

  /** A model from checkpoint bytes (the native .tinygpt format). */
  static async fromCheckpoint(
    bytes: Uint8Array,
    load: LoadOptions | LoadedModule = {},
    name = 'checkpoint',
  ): Promise<Engine> {
    const [module, owns] = load instanceof LoadedModule ? [load, false] : [await loadModule(load), true];
    try {
      const h = module.withString(name, (np) =>
        module.withBytes(bytes, (p, n) => module.mod._ptl_create_from_checkpoint(p, n, np)),
      );
      if (h <= 0) module.fail('ptl_create_from_checkpoint');
      return new Engine(module, h, owns);
    } catch (e) {
      if (owns) module.terminate();
      throw e;
    }
  }

  /**
   * A model from a Hugging Face GPT-2 folder's files (config.json, model.safetensors or
   * model.safetensors.index.json and its shards, tokenizer.json or vocab.json + merges.txt; other
   * files are ignored), read by the engine code of `ptl import-hf`: the same model and checks.
   * A bad folder rejects with the engine's message naming the file, e.g. "gpt2/config.json: no
   * such file (...)"; `label` is the folder's name in those messages.
   */
  static async fromHuggingFace(
    files: FolderFile[],
    load: LoadOptions | LoadedModule = {},
    label = '',
  ): Promise<{ engine: Engine; info: HfImportInfo }> {
    const [module, owns] = load instanceof LoadedModule ? [load, false] : [await loadModule(load), true];
    try {
      const m = module.mod;
      m._ptl_folder_clear();
      try {
        for (const f of files) {
          const rc = module.withString(f.name, (np) =>
            module.withBytes(f.bytes, (p, n) => m._ptl_folder_file(np, p, n)),
          );
          if (rc !== 0) module.fail('ptl_folder_file');
        }
      } catch (e) {
        m._ptl_folder_clear();
        throw e;
      }
      const r = module.withString(label, (lp) =>
        module.json<HfImportInfo & { handle: number }>(m._ptl_create_from_hf(lp), 'ptl_create_from_hf'),
      );
      return {
        engine: new Engine(module, r.handle, owns),
        info: { summary: r.summary, tokenizer_stored: r.tokenizer_stored },
      };
    } catch (e) {
      if (owns) module.terminate();
      throw e;
    }
  }

  get build(): BuildInfo {
    return this.module.build;
  }

  private h(): number {
    if (this.disposed) throw new EngineError('the engine was disposed', 'use');
    return this.handle;
  }
  private get m(): PtlModule {
    return this.module.mod;
  }

  async info(): Promise<EngineInfo> {
    return this.module.json<EngineInfo>(this.m._ptl_info(this.h()), 'ptl_info');
  }

  /**
   * The text to train on, split 90/10 by bytes into training and validation, each side in the
   * model's tokenizer (bytes are tokens for a byte-level model).
   */
  async setCorpus(corpus: Uint8Array | string, valFraction = 0.1): Promise<void> {
    const h = this.h();
    const rc = this.module.withBytes(corpus, (p, n) => this.m._ptl_set_corpus(h, p, n, valFraction));
    if (rc !== 0) this.module.fail('ptl_set_corpus');
  }

  /** Changes the schedule (steps, lr, schedule, warmup, min_lr_frac, eval_* , sample_every). */
  async updateTrainConfig(changes: Partial<TrainConfig>): Promise<void> {
    const h = this.h();
    const rc = this.module.withString(JSON.stringify(changes), (p) => this.m._ptl_update_train_config(h, p));
    if (rc !== 0) this.module.fail('ptl_update_train_config');
  }

  /** Runs `steps` optimizer steps; returns every step's metrics. */
  async train(steps: number, options: TrainOptions = {}): Promise<StepMetrics[]> {
    const h = this.h();
    if (!Number.isInteger(steps) || steps < 0)
      throw new EngineError('steps must be a non-negative integer', 'ptl_train');
    const chunk = Math.max(1, Math.floor(options.stepsPerChunk ?? 1));
    const all: StepMetrics[] = [];
    while (all.length < steps) {
      if (options.signal?.aborted) throw abortError(options.signal);
      const n = Math.min(chunk, steps - all.length);
      const metrics = this.module.json<StepMetrics[]>(this.m._ptl_train(h, n), 'ptl_train');
      for (const m of metrics) {
        all.push(m);
        options.onProgress?.(m, all.length, steps);
      }
      if (all.length < steps) await yieldToEventLoop();
    }
    return all;
  }

  /**
   * Per-op wall time of training steps, as `ptl bench --ops` prints natively: `true` clears the
   * totals and starts profiling, `false` stops it. Returns the seconds per op kind summed over
   * the steps trained since profiling started (before the change).
   */
  async profile(enable: boolean): Promise<Record<string, number>> {
    return this.module.json<Record<string, number>>(this.m._ptl_profile(this.h(), enable ? 1 : 0), 'ptl_profile');
  }

  /** Loss on the fixed validation windows of the corpus. */
  async validationLoss(): Promise<EvalMetrics> {
    return this.module.json<EvalMetrics>(this.m._ptl_validation_loss(this.h()), 'ptl_validation_loss');
  }

  /** Mean loss over every token of a text (as `ptl eval --data`). */
  async evaluate(text: Uint8Array | string): Promise<EvalMetrics> {
    const h = this.h();
    return this.module.withBytes(text, (p, n) =>
      this.module.json<EvalMetrics>(this.m._ptl_evaluate_text(h, p, n), 'ptl_evaluate_text'),
    );
  }

  /** Continues a prompt, streaming each token to options.onToken. */
  async generate(prompt: Uint8Array | string, options: GenerateOptions = {}): Promise<GenerateResult> {
    const h = this.h();
    const opts = JSON.stringify({
      max_tokens: options.maxTokens ?? 200,
      ...(options.temperature !== undefined ? { temperature: options.temperature } : {}),
      ...(options.topK !== undefined ? { top_k: options.topK } : {}),
      ...(options.topP !== undefined ? { top_p: options.topP } : {}),
      ...(options.seed !== undefined ? { seed: options.seed } : {}),
    });
    const out: number[] = [];
    // onText: the new tokens' bytes through a streaming UTF-8 decoder (it holds back a character
    // that more bytes may complete); each token's bytes are asked of the engine once.
    const onText = options.onText;
    const utf8 = new TextDecoder('utf-8');
    const pieces = new Map<number, Uint8Array>();
    const emit = (tok: number): void => {
      if (!onText) return;
      let b = pieces.get(tok);
      if (!b) pieces.set(tok, (b = this.decode([tok])));
      const t = utf8.decode(b, { stream: true });
      if (t) onText(t);
    };
    if ((options.mode ?? 'callback') === 'polling') {
      const rc = this.module.withString(opts, (op) =>
        this.module.withBytes(prompt, (p, n) => this.m._ptl_generate_start(h, p, n, op)),
      );
      if (rc !== 0) this.module.fail('ptl_generate_start');
      try {
        for (;;) {
          if (options.signal?.aborted) throw abortError(options.signal);
          const tok = this.m._ptl_generate_next(h);
          if (tok === -1) break;
          if (tok < 0) this.module.fail('ptl_generate_next');
          out.push(tok);
          emit(tok);
          if (options.onToken?.(tok) === false) break;
          await yieldToEventLoop();
        }
      } finally {
        this.m._ptl_generate_stop(h);
      }
    } else {
      let thrown: unknown;
      const onToken = options.onToken;
      const signal = options.signal;
      const cb = (tok: number): number => {
        out.push(tok);
        try {
          if (signal?.aborted) return 0;
          emit(tok);
          return onToken?.(tok) === false ? 0 : 1;
        } catch (e) {
          thrown = e; // never throw through the engine: stop it, rethrow here
          return 0;
        }
      };
      const wide = this.module.build.memory64;
      const fn = this.m.addFunction(cb as (...args: never[]) => unknown, 'ii');
      try {
        const res = this.module.withString(opts, (op) =>
          this.module.withBytes(prompt, (p, n) => this.m._ptl_generate(h, p, n, op, wide ? BigInt(fn) : fn)),
        );
        if (this.module.addr(res) === 0) this.module.fail('ptl_generate');
      } finally {
        this.m.removeFunction(fn);
      }
      if (thrown !== undefined) throw thrown;
      if (signal?.aborted) throw abortError(signal);
    }
    if (onText) {
      const rest = utf8.decode();
      if (rest) onText(rest);
    }
    const ids = Int32Array.from(out);
    const tokens = this.decode(ids);
    return { tokens, ids, text: new TextDecoder('utf-8').decode(tokens) };
  }

  /** The model's tokenizer: bytes, or the BPE tokenizer its checkpoint records. */
  tokenizerInfo(): TokenizerInfo {
    return this.module.json<TokenizerInfo>(this.m._ptl_model_tokenizer_info(this.h()), 'ptl_model_tokenizer_info');
  }

  /** The model's tokenizer as tokenizer.json text (the byte tokenizer's for a byte-level model). */
  tokenizerJson(): string {
    return this.module.text(this.m._ptl_model_tokenizer_json(this.h()), 'ptl_model_tokenizer_json');
  }

  /** The token ids of a text (any bytes) in the model's tokenizer. */
  encode(text: Uint8Array | string): Int32Array {
    const h = this.h();
    const bytes = this.module.withBytes(text, (p, n) =>
      this.module.bytes(this.m._ptl_model_encode(h, p, n), 'ptl_model_encode'),
    );
    return new Int32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4);
  }

  /** The bytes of token ids in the model's tokenizer (an id outside the vocabulary is an error). */
  decode(ids: ArrayLike<number>): Uint8Array {
    const h = this.h();
    const arr = ids instanceof Int32Array ? ids : Int32Array.from(ids);
    const raw = new Uint8Array(arr.buffer, arr.byteOffset, arr.byteLength);
    return this.module.withBytes(raw, (p) =>
      this.module.bytes(this.m._ptl_model_decode(h, p, arr.length), 'ptl_model_decode'),
    );
  }

  /** decode() as UTF-8 text (invalid sequences become U+FFFD). */
  decodeText(ids: ArrayLike<number>): string {
    return new TextDecoder('utf-8').decode(this.decode(ids));
  }

  /** The state as checkpoint bytes (.tinygpt, loadable by native `ptl`). */
  async exportCheckpoint(options: { optimizer?: boolean } = {}): Promise<Uint8Array> {
    const withOpt = options.optimizer ?? true;
    return this.module.bytes(this.m._ptl_export_checkpoint(this.h(), withOpt ? 1 : 0), 'ptl_export_checkpoint');
  }

  /** The weights only (a checkpoint without optimizer moments), e.g. a fresh model's initial weights. */
  async exportWeights(): Promise<Uint8Array> {
    return this.exportCheckpoint({ optimizer: false });
  }

  /** Replaces the whole state with a checkpoint's; on error nothing changes. */
  async importCheckpoint(bytes: Uint8Array, name = 'checkpoint'): Promise<void> {
    const h = this.h();
    const rc = this.module.withString(name, (np) =>
      this.module.withBytes(bytes, (p, n) => this.m._ptl_load_checkpoint(h, p, n, np)),
    );
    if (rc !== 0) this.module.fail('ptl_load_checkpoint');
  }

  /** The serialised program (Program::to_json) that the engine runs for this model. */
  async exportProgram(which: ProgramName = 'train'): Promise<ProgramJson> {
    const h = this.h();
    return this.module.withString(which, (p) =>
      this.module.json<ProgramJson>(this.m._ptl_export_program(h, p), 'ptl_export_program'),
    );
  }

  /**
   * The batch of the next training step, for an executor outside the engine (the WebGPU
   * backend): the batch `train` would draw next, from the same data order, and its learning rate.
   * The engine counts the step as done elsewhere (step and tokens_seen advance as `train`'s do),
   * so N calls leave the data order, step and token count of N `train` steps; the weights stay
   * (bring the other executor's back tensor by tensor with writeTensor, and report each step's
   * loss with recordStep).
   */
  async nextBatch(): Promise<NextBatch> {
    const h = this.h();
    const bytes = this.module.bytes(this.m._ptl_next_batch(h), 'ptl_next_batch');
    const info = await this.info();
    // tokens then targets, int32 little-endian; with SFT data then the loss mask, float32
    const n = info.train.batch * info.model.ctx;
    const all = new Int32Array(bytes.buffer, bytes.byteOffset, 2 * n);
    const mask = bytes.length === 12 * n ? new Float32Array(bytes.buffer, bytes.byteOffset + 8 * n, n) : undefined;
    const lr = this.lrAt(info.step - 1);
    return {
      tokens: all.subarray(0, n),
      targets: all.subarray(n, 2 * n),
      ...(mask ? { mask } : {}),
      batch: info.train.batch,
      seq: info.model.ctx,
      step: info.step,
      lr,
    };
  }

  /** The learning rate of 0-based step `step` (1-based step step + 1) under the current schedule. */
  lrAt(step: number): number {
    const lr = this.m._ptl_lr_at(this.h(), step);
    if (Number.isNaN(lr)) this.module.fail('ptl_lr_at');
    return lr;
  }

  /**
   * What the engine's training loop says follows step `step` (1-based): the rule `train` applies,
   * for an executor that decides right after submitting a step, before its loss comes back.
   */
  eventsAfter(step: number): StepEvents {
    return this.module.json<StepEvents>(this.m._ptl_events_after(this.h(), step), 'ptl_events_after');
  }

  /**
   * Records a step another executor ran on a batch of nextBatch, once its loss is known (steps in
   * order): the history point, the elapsed time, the divergence check (a non-finite loss or
   * gradient norm rejects with the step named). Returns the events after the step.
   */
  recordStep(r: ExternalStep): StepEvents {
    const body = JSON.stringify({
      step: r.step,
      loss: Number.isFinite(r.loss) ? r.loss : null,
      grad_norm: r.gradNorm === undefined ? 0 : Number.isFinite(r.gradNorm) ? r.gradNorm : null,
      seconds: r.seconds ?? 0,
    });
    return this.module.withString(body, (p) =>
      this.module.json<StepEvents>(this.m._ptl_record_step(this.h(), p), 'ptl_record_step'),
    );
  }

  /** Extra events of the training loop: a sample at the last step, a save every N steps. */
  loopOptions(options: LoopOptions): void {
    const body = JSON.stringify({
      ...(options.sampleAtEnd !== undefined ? { sample_at_end: options.sampleAtEnd } : {}),
      ...(options.saveEvery !== undefined ? { save_every: options.saveEvery } : {}),
    });
    const rc = this.module.withString(body, (p) => this.m._ptl_loop_options(this.h(), p));
    if (rc !== 0) this.module.fail('ptl_loop_options');
  }

  /** The model's state: parameters (LoRA adapters included), then the trainable ones' AdamW moments. */
  tensorNames(): StateTensor[] {
    return this.module.json<StateTensor[]>(this.m._ptl_tensor_names(this.h()), 'ptl_tensor_names');
  }

  /** A copy of one state tensor (float32). */
  readTensor(name: string): Float32Array {
    const h = this.h();
    const bytes = this.module.withString(name, (np) =>
      this.module.bytes(this.m._ptl_read_tensor(h, np), 'ptl_read_tensor'),
    );
    return new Float32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4);
  }

  /** Overwrites one state tensor (its whole size, float32); moments not present yet are created. */
  writeTensor(name: string, data: Float32Array | Uint8Array): void {
    const h = this.h();
    const bytes = data instanceof Uint8Array ? data : new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
    const rc = this.module.withString(name, (np) =>
      this.module.withBytes(bytes, (p, n) => this.m._ptl_write_tensor(h, np, p, n)),
    );
    if (rc !== 0) this.module.fail('ptl_write_tensor');
  }

  /** Sets the number of steps done (another executor's count); the data order does not move. */
  setStep(step: number): void {
    if (this.m._ptl_set_step(this.h(), step) !== 0) this.module.fail('ptl_set_step');
  }

  /**
   * "Watch the model think": the most likely next tokens after the prompt and every layer's
   * attention maps, from one forward pass over the prompt's last ctx tokens (LoRA adapters included).
   */
  async inspect(prompt: Uint8Array | string, options: InspectOptions = {}): Promise<InspectResult> {
    const h = this.h();
    const topK = Math.floor(options.topK ?? 10);
    const bytes = this.module.withBytes(prompt, (p, n) =>
      this.module.bytes(this.m._ptl_inspect(h, p, n, topK), 'ptl_inspect'),
    );
    // u64 header length, JSON header (padded to 8 bytes), float32 [layers, heads, T, T].
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    const headerLen = Number(view.getBigUint64(0, true));
    const header = JSON.parse(new TextDecoder().decode(bytes.subarray(8, 8 + headerLen))) as {
      tokens: number[];
      top: { token: number; byte: number; prob: number }[];
      layers: number;
      heads: number;
      T: number;
    };
    const { layers, heads, T } = header;
    const attention = new Float32Array(bytes.buffer, bytes.byteOffset + 8 + headerLen, layers * heads * T * T);
    const maps: Float32Array[][] = [];
    for (let l = 0; l < layers; l++) {
      const row: Float32Array[] = [];
      for (let hd = 0; hd < heads; hd++)
        row.push(attention.subarray((l * heads + hd) * T * T, (l * heads + hd + 1) * T * T));
      maps.push(row);
    }
    return { tokens: Int32Array.from(header.tokens), top: header.top, layers, heads, T, attention, maps };
  }

  /** Starts fine-tuning the current weights (as `ptl lora train` / `ptl sft`): step 0, new schedule. */
  async startFinetune(options: FinetuneOptions): Promise<void> {
    const h = this.h();
    const rc = this.module.withString(JSON.stringify(options), (p) => this.m._ptl_start_finetune(h, p));
    if (rc !== 0) this.module.fail('ptl_start_finetune');
  }

  /** SFT examples (JSONL: {"prompt","response"} or {"messages":[...]}) instead of the corpus. */
  async setSftData(jsonl: Uint8Array | string, name = 'sft data'): Promise<void> {
    const h = this.h();
    const rc = this.module.withString(name, (np) =>
      this.module.withBytes(jsonl, (p, n) => this.m._ptl_set_sft_data(h, p, n, np)),
    );
    if (rc !== 0) this.module.fail('ptl_set_sft_data');
  }

  /** The LoRA adapters as an adapter file (`ptl sample --adapter` reads it). */
  async exportAdapter(): Promise<Uint8Array> {
    return this.module.bytes(this.m._ptl_export_adapter(this.h()), 'ptl_export_adapter');
  }

  /** Adapters trained on this model's base; refused (nothing changes) for another base. */
  async loadAdapter(bytes: Uint8Array, name = 'adapter'): Promise<void> {
    const h = this.h();
    const rc = this.module.withString(name, (np) =>
      this.module.withBytes(bytes, (p, n) => this.m._ptl_load_adapter(h, p, n, np)),
    );
    if (rc !== 0) this.module.fail('ptl_load_adapter');
  }

  /**
   * The LoRA adapters as a PEFT adapter folder (`ptl lora export-peft`'s files):
   * adapter_config.json and adapter_model.safetensors. `baseModel` is base_model_name_or_path.
   */
  async exportPeft(baseModel = ''): Promise<FolderFile[]> {
    const h = this.h();
    return this.module.withString(baseModel, (bp) =>
      this.module.files(this.m._ptl_export_peft(h, bp), 'ptl_export_peft'),
    );
  }

  /**
   * The model as a Hugging Face GPT-2 folder (`ptl export-hf`'s files: config.json,
   * model.safetensors, tokenizer.json), with the LoRA adapters merged in (`ptl lora merge`) when it
   * has them; the engine keeps its adapters.
   */
  async exportHuggingFace(): Promise<FolderFile[]> {
    return this.module.files(this.m._ptl_export_hf(this.h()), 'ptl_export_hf');
  }

  async loraInfo(): Promise<LoraInfo> {
    return this.module.json<LoraInfo>(this.m._ptl_lora_info(this.h()), 'ptl_lora_info');
  }

  /** Frees the model; when this engine loaded its own module, stops the module's threads too. */
  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    this.m._ptl_free(this.handle);
    this.module.release();
    if (this.ownsModule) this.module.terminate();
  }
}
