// The messages between the playground page and its training worker (session-worker.ts).
//
// The page sends {id, method, params}; the worker answers {id, ok, result | error} and, while a
// call runs, events {id, event, data}. Calls run one at a time in order, except "abort", which
// stops the running call at its next step or token (what was done is kept). Training, sampling
// and inspection all happen in the worker, so the page never blocks.
import type { BuildInfo, EngineInfo, EvalMetrics, StepMetrics, TrainConfig } from '@posttrainllm/engine';

export type Backend = 'webgpu' | 'wasm';

/** A file of a model folder, by its name in the folder. */
export interface FolderFile {
  name: string;
  bytes: Uint8Array;
}
export type Variant = 'simd-threads' | 'simd' | 'scalar';

export interface RunSettings {
  steps: number; // total optimizer steps of the run (the schedule's length)
  batch: number;
  lr: number;
  schedule: 'cosine' | 'constant';
  /** The model's dropout rate while training (fixed at create: a run's resume keeps its rate). */
  dropout: number;
  seed: number;
  evalEvery: number;
  sampleEvery: number;
  autosaveEvery: number; // 0 = never
}

/** The tokens a new run's model reads: bytes, or a BPE tokenizer trained on the corpus. */
export type TokenizerChoice = { kind: 'bytes' } | { kind: 'bpe'; vocabSize: number };

/** A tokenizer the worker prepared for the next run (prepareTokenizer). */
export interface TokenizerSummary {
  type: 'byte' | 'bpe';
  /** Its vocabulary: for BPE, below the size asked for when the text ran out of pairs to merge. */
  vocabSize: number;
  merges: number;
  /** BPE: the seconds its training took, and the corpus it was trained on. */
  seconds: number;
  corpus: string;
}

export interface CorpusInfo {
  name: string; // "TinyShakespeare", a file name, or "hf:dataset/config/split:column"
  bytes: number;
}

/** A step's metrics as the page records them (the engine's, without the loop's events). */
export type RunStep = Omit<StepMetrics, 'events'>;

export interface EvalPoint extends EvalMetrics {
  step: number;
}
export interface SamplePoint {
  step: number;
  text: string;
}

/** Everything needed to resume a run: kept by the worker, autosaved to OPFS with the checkpoint. */
export interface RunState {
  settings: RunSettings;
  preset: string;
  backend: Backend;
  corpus: CorpusInfo;
  steps: RunStep[];
  evals: EvalPoint[];
  samples: SamplePoint[];
  savedAt?: string;
}

export interface ModelSummary {
  info: EngineInfo;
  backend: Backend;
  build: BuildInfo;
  adapter?: string; // the WebGPU adapter, when training there
}

export interface InspectResult {
  tokens: number[];
  /** Each token's bytes (one byte for a byte-level model). */
  pieces: number[][];
  top: { token: number; prob: number; piece: number[] }[];
  layers: number;
  heads: number;
  T: number;
  /** attention[layer][head]: T*T row-major probabilities (row = query position). */
  attention: Float32Array[][];
}

export interface FinetuneSummary {
  step: number;
  lora: { enabled: boolean; rank: number; alpha: number; targets: string[]; trainable_params: number };
  base_params: number;
  base_val_loss: number | null; // on the fine-tuning data's held-out part, before
  tuned_val_loss: number | null; // and after
  backend?: Backend; // where the fine-tuning ran
}

export interface Methods {
  load: { params: { variant: Variant; threads: number }; result: BuildInfo };
  /** A new model; a BPE choice trains its tokenizer first unless prepareTokenizer already did. */
  create: { params: { preset: string; settings: RunSettings; tokenizer: TokenizerChoice }; result: ModelSummary };
  /** Trains the BPE tokenizer of the choice on the current corpus (kept for the next create). */
  prepareTokenizer: { params: { choice: TokenizerChoice }; result: TokenizerSummary };
  open: { params: { bytes: Uint8Array; name: string }; result: ModelSummary & { state: RunState | null } };
  /** The split; with a model, its tokens too (in the model's tokenizer). */
  setCorpus: {
    params: { bytes: Uint8Array; info: CorpusInfo };
    result: { train_bytes: number; val_bytes: number; train_tokens?: number; val_tokens?: number };
  };
  setBackend: { params: { backend: Backend }; result: ModelSummary | null };
  train: {
    params: { settings: RunSettings };
    result: { step: number; reason: 'done' | 'aborted'; backend: Backend; adapter?: string };
  };
  generate: {
    params: { prompt: string; maxTokens: number; temperature: number; topK: number; topP: number; seed: number };
    result: { text: string; tokens: number; seconds: number; firstTokenSeconds: number };
  };
  inspect: { params: { prompt: string }; result: InspectResult };
  exportCheckpoint: { params: { optimizer: boolean }; result: Uint8Array };
  restore: {
    params: Record<string, never>;
    result: (ModelSummary & { state: RunState; corpus: Uint8Array | null }) | null;
  };
  clearAutosave: { params: Record<string, never>; result: null };
  calibrate: { params: Record<string, never>; result: { gflops: number } };
  /**
   * A Hugging Face GPT-2 folder's files, read by the engine (`ptl import-hf`'s code): kept as the
   * base that ftStart's `gpt2` starts from. A bad folder rejects with the engine's message.
   */
  gpt2Open: { params: { files: FolderFile[]; label: string }; result: { summary: string; params: number } };
  ftStart: {
    params: {
      base: Uint8Array | null; // a checkpoint to start from; null = the current model (or the GPT-2 one)
      gpt2?: boolean; // start from the GPT-2 folder of gpt2Open
      data: { bytes: Uint8Array; name: string; kind: 'text' | 'jsonl' };
      steps: number;
      lr: number;
      lora: { rank: number; alpha: number; targets: string[] } | null; // null = every weight trains
      seed: number;
    };
    result: FinetuneSummary;
  };
  ftCompare: {
    params: { prompt: string; maxTokens: number; temperature: number; topK: number; seed: number };
    // The fine-tuned sample's tokens and the seconds they took.
    result: { base: string; tuned: string; tunedTokens: number; tunedSeconds: number };
  };
  ftExportAdapter: { params: Record<string, never>; result: Uint8Array };
  /** The adapters as PEFT's adapter_config.json and adapter_model.safetensors. */
  ftExportPeft: { params: { baseModel: string }; result: FolderFile[] };
  /** The fine-tuned model (adapters merged) as a Hugging Face GPT-2 folder's files. */
  ftExportHf: { params: Record<string, never>; result: FolderFile[] };
  ftExportModel: { params: Record<string, never>; result: Uint8Array };
  ftLoadAdapter: { params: { bytes: Uint8Array; name: string }; result: FinetuneSummary };
  abort: { params: Record<string, never>; result: null };
  /** Frees the model and GPU buffers and ends the engine's threads; the worker then closes itself. */
  shutdown: { params: Record<string, never>; result: null };
}
export type Method = keyof Methods;

export type WorkerEvent =
  | { event: 'step'; data: RunStep }
  | { event: 'eval'; data: EvalPoint; heapBytes?: number } // heapBytes: the WebAssembly engine's memory
  | { event: 'sample'; data: SamplePoint }
  | { event: 'autosave'; data: { step: number; bytes: number } }
  // A save that failed (a full quota): why, and the step of this run's last good autosave (null:
  // none yet). Training goes on.
  | { event: 'autosaveFailed'; data: { step: number; reason: string; kept: number | null } }
  // Sampled tokens: their ids and the text they complete (empty while a character is split
  // across tokens; the ids then come with the next text). The last may have no ids: the end.
  | { event: 'token'; data: { ids: number[]; text: string } }
  | { event: 'ftstep'; data: RunStep }
  | { event: 'log'; data: { message: string } }
  | { event: 'progress'; data: { message: string } }; // a slow start (a tokenizer training, GPU kernels compiling)

export type Reply =
  | { id: number; ok: true; result: unknown }
  | { id: number; ok: false; error: { name: string; message: string } }
  | ({ id: number } & WorkerEvent);

export type { BuildInfo, EngineInfo, EvalMetrics, StepMetrics, TrainConfig };
