// The engine in a Web Worker (or a Node worker_threads Worker), and its message protocol.
//
// Training and generation block the thread they run on, and a threaded build's main thread
// must be allowed to wait (Atomics.wait), which a page's main thread is not. So a page runs
// the engine in a worker:
//
//   // engine-worker.js (a classic worker script)
//   import { serveEngine } from "./worker.js";  // or bundled
//   serveEngine(self);
//
//   // the page
//   const client = new EngineClient(new Worker("engine-worker.js"));
//   await client.call("load", { variant: "simd-threads", buildDir: "/wasm" });
//   await client.call("create", { config: { preset: "small" } });
//   await client.call("train", { steps: 100 }, (ev) => console.log(ev));
//
// Protocol: the page sends {id, method, params}; the worker answers {id, ok: true, result} or
// {id, ok: false, error: {name, message, call}}; while a call runs it may send
// {id, event: "progress" | "token", data}. Calls run one at a time, in order, except "abort",
// which stops the running call at its next step or token (the work done so far is kept).

import {
  Engine,
  EngineError,
  loadModule,
  LoadedModule,
  type BuildInfo,
  type CreateConfig,
  type EngineInfo,
  type EvalMetrics,
  type FinetuneOptions,
  type InspectResult,
  type LoadOptions,
  type ExternalStep,
  type LoopOptions,
  type NextBatch,
  type StateTensor,
  type StepEvents,
  type ProgramJson,
  type ProgramName,
  type StepMetrics,
  type TokenizerInfo,
  type TrainConfig,
} from './engine.js';

/** Each method: its params and its result. */
export interface Methods {
  load: { params: Omit<LoadOptions, 'factory' | 'print'>; result: BuildInfo };
  create: { params: { config: CreateConfig }; result: EngineInfo };
  fromCheckpoint: { params: { bytes: Uint8Array; name?: string }; result: EngineInfo };
  info: { params: Record<string, never>; result: EngineInfo };
  setCorpus: { params: { corpus: Uint8Array | string; valFraction?: number }; result: null };
  updateTrainConfig: { params: { changes: Partial<TrainConfig> }; result: null };
  startFinetune: { params: { options: FinetuneOptions }; result: null };
  train: { params: { steps: number; stepsPerChunk?: number }; result: StepMetrics[] };
  validationLoss: { params: Record<string, never>; result: EvalMetrics };
  profile: { params: { enable: boolean }; result: Record<string, number> };
  evaluate: { params: { text: Uint8Array | string }; result: EvalMetrics };
  generate: {
    params: {
      prompt: Uint8Array | string;
      maxTokens?: number;
      temperature?: number;
      topK?: number;
      topP?: number;
      seed?: number;
    };
    result: { tokens: Uint8Array; ids: Int32Array; text: string };
  };
  /** The model's tokenizer (its checkpoint's): identity, merges, special tokens. */
  tokenizerInfo: { params: Record<string, never>; result: TokenizerInfo };
  encode: { params: { text: Uint8Array | string }; result: Int32Array };
  decode: { params: { ids: number[] | Int32Array }; result: Uint8Array };
  exportCheckpoint: { params: { optimizer?: boolean }; result: Uint8Array };
  importCheckpoint: { params: { bytes: Uint8Array; name?: string }; result: EngineInfo };
  exportProgram: { params: { which?: ProgramName }; result: ProgramJson };
  nextBatch: { params: Record<string, never>; result: NextBatch };
  eventsAfter: { params: { step: number }; result: StepEvents };
  recordStep: { params: ExternalStep; result: StepEvents };
  loopOptions: { params: LoopOptions; result: null };
  tensorNames: { params: Record<string, never>; result: StateTensor[] };
  readTensor: { params: { name: string }; result: Float32Array };
  writeTensor: { params: { name: string; data: Float32Array | Uint8Array }; result: null };
  setStep: { params: { step: number }; result: null };
  inspect: { params: { prompt: Uint8Array | string; topK?: number }; result: InspectResult };
  /** Needs only "load" (no model): LoadedModule.runProgram. */
  runProgram: { params: { program: ProgramJson | string; inputs: Uint8Array }; result: Uint8Array };
  dispose: { params: Record<string, never>; result: null };
  abort: { params: Record<string, never>; result: null };
}
export type Method = keyof Methods;

export interface Request<M extends Method = Method> {
  id: number;
  method: M;
  params: Methods[M]['params'];
}
export type ProgressEvent = {
  id: number;
  event: 'progress';
  data: { metrics: StepMetrics; done: number; total: number };
};
export type TokenEvent = { id: number; event: 'token'; data: { token: number } };
export type Reply =
  | { id: number; ok: true; result: unknown }
  | { id: number; ok: false; error: { name: string; message: string; call: string } }
  | ProgressEvent
  | TokenEvent;

/** What serveEngine needs from a worker scope (a DedicatedWorkerGlobalScope or a MessagePort-like). */
export interface Port {
  postMessage(message: unknown, transfer?: Transferable[]): void;
  addEventListener(type: 'message', listener: (ev: { data: unknown }) => void): void;
}

// Results whose large buffers move to the page instead of being copied: bytes (checkpoints,
// safetensors) and the attention maps of an inspection (its per-head views share that buffer).
function transferables(result: unknown): Transferable[] {
  if (result instanceof Uint8Array) return [result.buffer];
  const attention = (result as { attention?: unknown } | null)?.attention;
  if (attention instanceof Float32Array) return [attention.buffer];
  return [];
}

/** Runs in the worker: answers requests from the page. */
export function serveEngine(port: Port): void {
  let module: LoadedModule | null = null;
  let engine: Engine | null = null;
  let abort: AbortController | null = null;
  let queue: Promise<void> = Promise.resolve();

  const needModule = (): LoadedModule => {
    if (!module) throw new EngineError("no engine loaded: send 'load' first", 'worker');
    return module;
  };
  const needEngine = (): Engine => {
    if (!engine) throw new EngineError("no model: send 'create' or 'fromCheckpoint' first", 'worker');
    return engine;
  };
  const replace = (next: Engine): Engine => {
    engine?.dispose();
    engine = next;
    return next;
  };

  async function handle(req: Request): Promise<unknown> {
    const signal = abort?.signal;
    switch (req.method) {
      case 'load': {
        if (module) throw new EngineError('an engine is already loaded in this worker', 'worker');
        module = await loadModule(req.params as Methods['load']['params']);
        return module.build;
      }
      case 'create':
        return replace(await Engine.create((req.params as Methods['create']['params']).config, needModule())).info();
      case 'fromCheckpoint': {
        const p = req.params as Methods['fromCheckpoint']['params'];
        return replace(await Engine.fromCheckpoint(p.bytes, needModule(), p.name)).info();
      }
      case 'info':
        return needEngine().info();
      case 'setCorpus': {
        const p = req.params as Methods['setCorpus']['params'];
        await needEngine().setCorpus(p.corpus, p.valFraction);
        return null;
      }
      case 'updateTrainConfig':
        await needEngine().updateTrainConfig((req.params as Methods['updateTrainConfig']['params']).changes);
        return null;
      case 'startFinetune':
        await needEngine().startFinetune((req.params as Methods['startFinetune']['params']).options);
        return null;
      case 'train': {
        const p = req.params as Methods['train']['params'];
        return needEngine().train(p.steps, {
          stepsPerChunk: p.stepsPerChunk,
          signal,
          onProgress: (metrics, done, total) =>
            port.postMessage({ id: req.id, event: 'progress', data: { metrics, done, total } }),
        });
      }
      case 'validationLoss':
        return needEngine().validationLoss();
      case 'profile':
        return needEngine().profile((req.params as Methods['profile']['params']).enable);
      case 'evaluate':
        return needEngine().evaluate((req.params as Methods['evaluate']['params']).text);
      case 'generate': {
        const { prompt, ...opts } = req.params as Methods['generate']['params'];
        return needEngine().generate(prompt, {
          ...opts,
          mode: 'polling', // yields between tokens, so an "abort" message can arrive
          signal,
          onToken: (token) => port.postMessage({ id: req.id, event: 'token', data: { token } }),
        });
      }
      case 'tokenizerInfo':
        return needEngine().tokenizerInfo();
      case 'encode':
        return needEngine().encode((req.params as Methods['encode']['params']).text);
      case 'decode':
        return needEngine().decode((req.params as Methods['decode']['params']).ids);
      case 'exportCheckpoint':
        return needEngine().exportCheckpoint(req.params as Methods['exportCheckpoint']['params']);
      case 'importCheckpoint': {
        const p = req.params as Methods['importCheckpoint']['params'];
        await needEngine().importCheckpoint(p.bytes, p.name);
        return needEngine().info();
      }
      case 'exportProgram':
        return needEngine().exportProgram((req.params as Methods['exportProgram']['params']).which);
      case 'nextBatch':
        return needEngine().nextBatch();
      case 'eventsAfter':
        return needEngine().eventsAfter((req.params as Methods['eventsAfter']['params']).step);
      case 'recordStep':
        return needEngine().recordStep(req.params as Methods['recordStep']['params']);
      case 'loopOptions':
        needEngine().loopOptions(req.params as Methods['loopOptions']['params']);
        return null;
      case 'tensorNames':
        return needEngine().tensorNames();
      case 'readTensor':
        return needEngine().readTensor((req.params as Methods['readTensor']['params']).name);
      case 'writeTensor': {
        const p = req.params as Methods['writeTensor']['params'];
        needEngine().writeTensor(p.name, p.data);
        return null;
      }
      case 'setStep':
        needEngine().setStep((req.params as Methods['setStep']['params']).step);
        return null;
      case 'inspect': {
        const p = req.params as Methods['inspect']['params'];
        return needEngine().inspect(p.prompt, { topK: p.topK });
      }
      case 'runProgram': {
        const p = req.params as Methods['runProgram']['params'];
        return needModule().runProgram(p.program, p.inputs);
      }
      case 'dispose':
        engine?.dispose();
        engine = null;
        return null;
      default:
        throw new EngineError(`unknown method '${String(req.method)}'`, 'worker');
    }
  }

  port.addEventListener('message', (ev) => {
    const req = ev.data as Request;
    if (req.method === 'abort') {
      abort?.abort(new EngineError('aborted', 'abort'));
      port.postMessage({ id: req.id, ok: true, result: null });
      return;
    }
    queue = queue.then(async () => {
      abort = new AbortController();
      try {
        const result = await handle(req);
        const transfer = transferables(result);
        port.postMessage({ id: req.id, ok: true, result }, transfer);
      } catch (e) {
        const err =
          e instanceof EngineError ? e : new EngineError(e instanceof Error ? e.message : String(e), 'worker');
        port.postMessage({ id: req.id, ok: false, error: { name: err.name, message: err.message, call: err.call } });
      } finally {
        abort = null;
      }
    });
  });
}

/** Runs on the page: a typed client for a worker that called serveEngine. */
export class EngineClient {
  private next = 1;
  private pending = new Map<
    number,
    { resolve: (v: unknown) => void; reject: (e: Error) => void; onEvent?: (ev: ProgressEvent | TokenEvent) => void }
  >();

  constructor(private readonly port: Port) {
    port.addEventListener('message', (ev) => {
      const msg = ev.data as Reply;
      const p = this.pending.get(msg.id);
      if (!p) return;
      if ('event' in msg) {
        p.onEvent?.(msg);
        return;
      }
      this.pending.delete(msg.id);
      if (msg.ok) p.resolve(msg.result);
      else p.reject(new EngineError(msg.error.message, msg.error.call));
    });
  }

  call<M extends Method>(
    method: M,
    params: Methods[M]['params'],
    onEvent?: (ev: ProgressEvent | TokenEvent) => void,
  ): Promise<Methods[M]['result']> {
    const id = this.next++;
    return new Promise<Methods[M]['result']>((resolve, reject) => {
      this.pending.set(id, { resolve: resolve as (v: unknown) => void, reject, onEvent });
      this.port.postMessage({ id, method, params } satisfies Request<M>);
    });
  }
}
