// Picks the best engine build for this JavaScript environment and model.
//
//   const choice = selectBuild({ model: { n_layers: 3, d_model: 96, n_heads: 3, ctx: 64 }, batch: 16 });
//   // { variant: "simd-threads", reason: "...", threads: 2, ... }
//
// Rules (docs/wasm.md, "Choosing a build"):
// - SIMD when the engine validates a tiny module that uses 128-bit SIMD (WebAssembly.validate).
// - Threads only where SharedArrayBuffer and shared WebAssembly memory exist, and in a browser
//   only when the page is cross-origin isolated (COOP/COEP headers); Node always qualifies.
// - Memory64 only for models whose state needs more than 2 GiB, and only where the engine
//   validates a 64-bit memory (the Memory64 build has neither SIMD nor threads with this
//   toolchain: see docs/wasm.md). Otherwise the best wasm32 build, with a note when the model may
//   not fit.

export type Variant = 'scalar' | 'simd' | 'simd-threads' | 'memory64';

export interface Capabilities {
  simd: boolean;
  /** Shared memory and atomics available, and (in a browser) the page is cross-origin isolated. */
  threads: boolean;
  memory64: boolean;
  crossOriginIsolated: boolean;
  node: boolean;
  hardwareConcurrency: number;
}

export interface ModelShape {
  vocab_size?: number;
  n_layers: number;
  d_model: number;
  n_heads: number;
  ctx: number;
}

export interface SelectRequest {
  /** The model to run; with `batch`, it gives the memory the engine will need. */
  model?: ModelShape;
  batch?: number;
  /** The memory needed, in bytes, when the caller knows it (overrides the estimate). */
  stateBytes?: number;
  /** Builds the host has (default: all four). */
  available?: Variant[];
}

export interface BuildChoice {
  variant: Variant;
  /** Why this build, in a sentence a person can read. */
  reason: string;
  /** Pthread pool size to load it with (1 for single-threaded builds). */
  threads: number;
  /** The memory estimate used, in bytes (0 when no model was given). */
  stateBytes: number;
  capabilities: Capabilities;
}

// (module (func (result v128) i32.const 0 i8x16.splat i8x16.popcnt))
const SIMD_PROBE = new Uint8Array([
  0, 97, 115, 109, 1, 0, 0, 0, 1, 5, 1, 96, 0, 1, 123, 3, 2, 1, 0, 10, 10, 1, 8, 0, 65, 0, 253, 15, 253, 98, 11,
]);
// (module (memory i64 1)): a memory section whose limits flag 0x04 marks a 64-bit index.
const MEMORY64_PROBE = new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0, 5, 3, 1, 4, 1]);

const GiB = 1024 ** 3;
/** Above this the wasm32 builds are not used (their heap tops out at 4 GiB, 2 GiB in some engines). */
export const WASM32_STATE_LIMIT = 2 * GiB;

function validate(bytes: Uint8Array<ArrayBuffer>): boolean {
  try {
    return typeof WebAssembly === 'object' && WebAssembly.validate(bytes);
  } catch {
    return false;
  }
}

export function detectCapabilities(): Capabilities {
  const g = globalThis as {
    process?: { versions?: { node?: string } };
    crossOriginIsolated?: boolean;
    navigator?: { hardwareConcurrency?: number };
    SharedArrayBuffer?: unknown;
  };
  const node = typeof g.process?.versions?.node === 'string';
  const coi = g.crossOriginIsolated === true;
  let shared: boolean;
  try {
    shared =
      typeof g.SharedArrayBuffer === 'function' &&
      new WebAssembly.Memory({ initial: 1, maximum: 1, shared: true }).buffer instanceof SharedArrayBuffer;
  } catch {
    shared = false;
  }
  return {
    simd: validate(SIMD_PROBE),
    threads: shared && (node || coi),
    memory64: validate(MEMORY64_PROBE),
    crossOriginIsolated: coi,
    node,
    hardwareConcurrency: g.navigator?.hardwareConcurrency ?? nodeCores() ?? 4,
  };
}

// Node < 21 has no navigator; process.getBuiltinModule (Node >= 22.3) reads the core count
// synchronously. Otherwise 4 (loadModule counts the cores itself when it loads a build).
function nodeCores(): number | undefined {
  const proc = (globalThis as { process?: { getBuiltinModule?: (id: string) => unknown } }).process;
  const os = proc?.getBuiltinModule?.('node:os') as { availableParallelism?: () => number } | undefined;
  return os?.availableParallelism?.();
}

/**
 * Bytes the engine needs for a model trained at `batch`: weights, gradients and the two AdamW
 * moments (16 bytes per parameter), plus the training program's activations and the evaluation
 * program's (per token and layer about 22 d floats and 2 H floats; no logits: the loss is
 * computed over chunks of the vocabulary), plus one sequence's logits (ctx V floats: generation
 * past the context, inspection), plus a quarter for the allocator and 32 MiB for the runtime (the
 * same margins as wasm/api.cpp's heap reservation).
 */
export function estimateStateBytes(model: ModelShape, batch: number): number {
  const V = model.vocab_size ?? 256,
    d = model.d_model,
    T = model.ctx,
    L = model.n_layers,
    H = model.n_heads;
  const params = V * d + T * d + 2 * d + L * (12 * d * d + 13 * d);
  const tokens = batch * T;
  const activations = (tokens * (L * (22 * d + 2 * H) + 4 * d) + T * V) * 4;
  const need = params * 16 + activations * 1.5;
  return Math.ceil(need * 1.25 + 32 * 1024 * 1024);
}

function fmtGiB(bytes: number): string {
  return bytes >= GiB ? `${(bytes / GiB).toFixed(2)} GiB` : `${Math.ceil(bytes / (1024 * 1024))} MiB`;
}

export function selectBuild(request: SelectRequest = {}, caps: Capabilities = detectCapabilities()): BuildChoice {
  const available = new Set<Variant>(request.available ?? ['scalar', 'simd', 'simd-threads', 'memory64']);
  const bytes = request.stateBytes ?? (request.model ? estimateStateBytes(request.model, request.batch ?? 16) : 0);
  const cores = Math.max(1, Math.min(16, caps.hardwareConcurrency));
  const notes: string[] = [];
  const choose = (variant: Variant, why: string): BuildChoice => ({
    variant,
    reason: [why, ...notes].join('; '),
    threads: variant === 'simd-threads' ? cores : 1,
    stateBytes: bytes,
    capabilities: caps,
  });

  if (bytes > WASM32_STATE_LIMIT) {
    const need = `the model needs about ${fmtGiB(bytes)}, more than the ${fmtGiB(WASM32_STATE_LIMIT)} a 32-bit build should hold`;
    if (caps.memory64 && available.has('memory64'))
      return choose('memory64', `${need}: Memory64 (64-bit heap; single thread, no SIMD in this build)`);
    notes.push(
      `${need}, and Memory64 is ${
        !available.has('memory64') ? 'not built' : 'not supported here (Node 20 needs --experimental-wasm-memory64)'
      }: the model may not fit`,
    );
  }
  if (caps.simd && caps.threads && available.has('simd-threads'))
    return choose(
      'simd-threads',
      `SIMD and shared memory are available${caps.node ? ' (Node)' : ' and the page is cross-origin isolated'}: SIMD with ${cores} threads`,
    );
  if (caps.simd && available.has('simd')) {
    const why = caps.node
      ? 'shared memory is not available'
      : caps.crossOriginIsolated
        ? 'shared WebAssembly memory is not available'
        : 'the page is not cross-origin isolated (serve it with COOP: same-origin and COEP: require-corp for threads)';
    return choose('simd', `SIMD is available but ${why}: SIMD, single thread`);
  }
  if (available.has('scalar'))
    return choose(
      'scalar',
      caps.simd
        ? 'no SIMD build available: scalar, single thread'
        : 'this engine does not support WebAssembly SIMD: scalar, single thread',
    );
  throw new Error('selectBuild: none of the available builds can run here');
}
