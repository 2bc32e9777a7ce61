// The WebGPU executor: runs a serialised ptl program (engine/program.h, `ptl program`) with the
// WGSL kernels of web/webgpu/kernels, the counterpart of engine/backends/cpu/cpu_backend.cpp.
//
// - WebGPUBackend owns the device, the compiled pipelines (created once per op variant and shared
//   by every program), and the store of persistent tensors (parameters, AdamW moments, KV caches)
//   keyed by name, so the train, eval and generate programs of one model see the same weights.
// - Executor is one loaded program: one GPU buffer per non-persistent tensor, a list of prepared
//   dispatches (pipeline + cached bind group + workgroup counts) built once at load time, and
//   the per-dispatch uniform parameters in one buffer. run() records every dispatch of the
//   program into one compute pass of one command encoder and submits it once.
// - Reading back (the loss) goes through a pool of staging buffers with mapAsync and is never
//   awaited by run() itself: the caller decides when (if ever) to wait.
// - Device errors (validation, out-of-memory, uncaptured errors, device loss) are collected and
//   turned into WebGPUError exceptions at the next call.
import { type IncludeAliases, type KernelSource, sourceWithIncludes, specialise, withIncludes } from './kernels.js';
import { type MemoryPlan, bufferBytes, planMemory } from './memory.js';
import {
  TILED_DEFAULT,
  type TiledConfig,
  linearTiledSource,
  parseTiled,
  tiledFromDefines,
  tiledSmem,
  tiledThreads,
} from './linear_gen.js';
import {
  type OpInfo,
  type OpKind,
  type ProgramJSON,
  type TensorInfo,
  isPersistent,
  numel,
  parseProgram,
} from './program.js';

export class WebGPUError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'WebGPUError';
  }
}

export interface GPUTensor {
  info: TensorInfo;
  buffer: GPUBuffer;
  bytes: number; // numel * 4 (the buffer itself is rounded up to 16 bytes)
}

type Access = 'r' | 'w';
interface BindingSpec {
  binding: number;
  buffer: GPUBuffer;
  access: Access;
  what: string; // for error messages
  offset?: number; // bytes: a slice of the buffer (rows of a tensor), 256-byte aligned; default 0
  size?: number; // bytes of the slice; default the rest of the buffer
}
interface DispatchSpec {
  kernel: string;
  entry: string;
  defines?: Record<string, number>;
  includes?: IncludeAliases; // a variant's common files (e.g. the subgroup reductions)
  constants?: Record<string, number>;
  params: ParamWord[];
  bindings: BindingSpec[];
  workgroups: [number, number, number];
  label: string;
}
type ParamWord = { u: number } | { f: number } | { i: number };
const u = (v: number): ParamWord => ({ u: v });
const f = (v: number): ParamWord => ({ f: v });

interface PreparedDispatch {
  pipeline: GPUComputePipeline;
  bindGroup: GPUBindGroup;
  workgroups: [number, number, number];
  label: string;
}

// float32 -> the double a person typing that number would mean (adamw.cpp's as_typed): the
// shortest decimal that reads back as the same float.
export function asTyped(x: number): number {
  const fx = Math.fround(x);
  for (let d = 1; d <= 9; d++) {
    const s = fx.toPrecision(d);
    if (Math.fround(parseFloat(s)) === fx) return parseFloat(s);
  }
  return fx;
}

// AdamW step scalars, computed in double exactly like engine/backends/cpu/kernels/adamw.cpp.
export function adamwConstants(
  lr: number,
  step: number,
  attrs: Record<string, number>,
): [number, number, number, number, number, number, number, number] {
  const lrD = asTyped(Math.fround(lr));
  const b1 = asTyped(attrs['beta1'] ?? 0.9);
  const b2 = asTyped(attrs['beta2'] ?? 0.95);
  const wd = asTyped(attrs['weight_decay'] ?? 0);
  const t = Math.trunc(Math.fround(step));
  const bc1 = 1.0 - Math.pow(b1, t);
  const bc2 = 1.0 - Math.pow(b2, t);
  return [
    1.0 - lrD * wd, // decay
    1.0 - b1, // one_minus_b1
    b2, // b2
    1.0 - b2, // one_minus_b2
    -(lrD / bc1), // neg_step
    Math.sqrt(bc2), // bc2_sqrt
    attrs['eps'] ?? 1e-8,
    attrs['max_norm'] ?? 1.0,
  ];
}

// The generated 128 x 128 kernel (linear_tiled) is chosen ('auto') for products with at least this
// many 128 x 128 output tiles: with fewer, 128-wide tiles leave multiprocessors without work.
const WIDE_MIN_TILES = 512;

// Products with at most this many rows and this long a reduction run linear.wgsl's `rows` (one
// thread per output, no tile): a generation step's (one token; the logits of a 50,257-token
// vocabulary took 12 s a step on SwiftShader in 64 x 64 tiles, 63 of whose 64 rows are thrown
// away). Longer reductions keep the tiles' split-K.
const ROWS_MAX_I = 4;
const ROWS_MAX_P = 4096;

// Logits of one vocabulary chunk of cross_entropy_tied held at once ('auto'): 16 MiB, enough
// columns for the chunk's matrix product to fill a large GPU (GPT-2's 8192 rows: 512 columns).
const VOCAB_CHUNK_FLOATS = 1 << 22;

// For error messages: which common files a variant's module includes instead of the usual ones.
const aliasNote = (includes: IncludeAliases): string =>
  Object.keys(includes).length ? ` ${JSON.stringify(includes)}` : '';

function ceilDiv(a: number, b: number): number {
  return Math.floor((a + b - 1) / b);
}

// ---------------------------------------------------------------------------------------------

// The variant choices of a backend (see WebGPUBackend.options); every one has an 'auto'.
export interface BackendOptions {
  matmulTile: 'auto' | 64 | 128;
  matmulSplit: 'auto' | number;
  attentionRows: 'auto' | 32 | 64;
  matmulBK: 'auto' | 8 | 16;
  matmulNT: 'auto' | boolean;
  matmulTiled: 'auto' | 'off' | string;
  reductions: 'auto' | 'subgroup' | 'workgroup';
  vocabChunk: 'auto' | number;
}

export class WebGPUBackend {
  readonly device: GPUDevice;
  readonly kernels: KernelSource;
  readonly store = new Map<string, GPUTensor>();
  readonly maxWorkgroups: number;
  private readonly modules = new Map<string, GPUShaderModule>();
  private readonly pipelines = new Map<string, Promise<GPUComputePipeline>>();
  private pipelinesReady = 0;
  // Called as each new pipeline starts and finishes compiling (ready of total so far): the first
  // load of a program can compile for many seconds, and a page wants to show that it does.
  onPipelineProgress: ((ready: number, total: number) => void) | null = null;
  private readonly layouts = new Map<string, GPUBindGroupLayout>();
  private readonly staging: GPUBuffer[] = [];
  private failure: WebGPUError | null = null;
  private lost = false;

  // matmulTile: the C tile of a workgroup. 64 = linear.wgsl (64 x 64, 4 x 4 per thread), 128 =
  // linear_wide.wgsl (128 x 128, 8 x 8 per thread in named registers, double-buffered);
  // 'auto' = 128 where the product has enough 128 x 128 tiles to fill the GPU (see matmul()).
  // matmulBK: depth of linear_wide's K step (8 or 16); 'auto' = 8.
  // matmulNT: large forward products (x W^T, both operands contiguous along K) use
  // linear_nt.wgsl instead of linear_wide.wgsl ('auto' = yes).
  // matmulTiled: the generated kernel (linear_tiled, src/linear_gen.ts): 'auto' = the choice per
  // shape (see matmul()), 'off' = only the hand-written kernels,
  // or a configuration forced on every product, e.g. '128x128/8x8/k16/db0/tr1' (parseTiled).
  // matmulTile, matmulBK and matmulNT set to anything but 'auto' also turn it off.
  // matmulSplit: split-K factor; 'auto' splits products with fewer than 264 output tiles and
  // P >= 512 so that about 528 workgroups run (four per SM of a large GPU).
  // attentionRows: query (or key) rows per attention workgroup (one per thread); 'auto' = 64, even
  // where 64 leaves few workgroups: smaller blocks re-read every K/V tile more often (figures in
  // docs/webgpu.md "Attention").
  // reductions: the row reductions of layernorm and layernorm_backward (mean, variance, the dx
  // sums): 'subgroup' = kernels/common/reduce_subgroup.wgsl (needs the 'subgroups' feature),
  // 'workgroup' = the workgroup-memory tree of reduce.wgsl, 'auto' = subgroup where the device
  // has the feature. Both are deterministic on one device; they differ in summation order. (The
  // other row kernels use the tree.)
  // vocabChunk: vocabulary rows per chunk of cross_entropy_tied (a multiple of 64); 'auto' = as
  // many as make VOCAB_CHUNK_FLOATS logits for the op's rows (all of a small vocabulary).
  readonly options: BackendOptions;

  constructor(device: GPUDevice, kernels: KernelSource, options: Partial<BackendOptions> = {}) {
    this.device = device;
    this.kernels = kernels;
    this.options = {
      matmulTile: options.matmulTile ?? 'auto',
      matmulSplit: options.matmulSplit ?? 'auto',
      attentionRows: options.attentionRows ?? 'auto',
      matmulBK: options.matmulBK ?? 'auto',
      matmulNT: options.matmulNT ?? 'auto',
      matmulTiled: options.matmulTiled ?? 'auto',
      reductions: options.reductions ?? 'auto',
      vocabChunk: options.vocabChunk ?? 'auto',
    };
    if (this.options.matmulTiled !== 'auto' && this.options.matmulTiled !== 'off') parseTiled(this.options.matmulTiled); // fail early
    if (this.options.reductions === 'subgroup' && !device.features.has('subgroups'))
      throw new WebGPUError("reductions 'subgroup' needs a device with the 'subgroups' feature");
    this.maxWorkgroups = device.limits.maxComputeWorkgroupsPerDimension;
    device.addEventListener('uncapturederror', (ev: Event) => {
      const err = (ev as GPUUncapturedErrorEvent).error;
      this.fail(`uncaptured WebGPU error: ${err.message}`);
    });
    void device.lost.then((info) => {
      this.lost = true;
      if (info.reason !== 'destroyed') this.fail(`WebGPU device lost (${info.reason}): ${info.message}`);
    });
  }

  // The limits a training run needs beyond the defaults, capped by what the adapter offers.
  static requiredLimits(adapter: GPUAdapter): Record<string, number> {
    const a = adapter.limits;
    return {
      maxStorageBufferBindingSize: a.maxStorageBufferBindingSize,
      maxBufferSize: a.maxBufferSize,
      maxStorageBuffersPerShaderStage: Math.min(a.maxStorageBuffersPerShaderStage, 10),
      maxComputeWorkgroupStorageSize: a.maxComputeWorkgroupStorageSize,
    };
  }

  // The optional features the backend uses where the adapter has them: 'subgroups' (LayerNorm's
  // subgroup reductions, the matmul's sg1 variant). Request them with requiredLimits.
  static requiredFeatures(adapter: GPUAdapter): GPUFeatureName[] {
    return (['subgroups'] as GPUFeatureName[]).filter((f) => adapter.features.has(f));
  }

  fail(message: string): void {
    if (!this.failure) this.failure = new WebGPUError(message);
  }

  // Throws the first device error seen so far, if any.
  check(): void {
    if (this.failure) throw this.failure;
    if (this.lost) throw new WebGPUError('WebGPU device was destroyed');
  }

  // ---- tensors -------------------------------------------------------------------------------

  createBuffer(info: TensorInfo, label: string): GPUTensor {
    const bytes = numel(info.shape) * 4;
    const lim = this.device.limits;
    if (bytes > lim.maxStorageBufferBindingSize || bytes > lim.maxBufferSize)
      throw new WebGPUError(
        `tensor '${info.name}' needs ${bytes} bytes, more than this device can bind ` +
          `(maxStorageBufferBindingSize ${lim.maxStorageBufferBindingSize}, maxBufferSize ${lim.maxBufferSize})`,
      );
    const size = Math.max(16, Math.ceil(bytes / 16) * 16);
    const buffer = this.device.createBuffer({
      label,
      size,
      usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST,
    });
    return { info, buffer, bytes };
  }

  // A persistent tensor from the store, created zero-filled on first use (like the CPU TensorStore).
  persistent(info: TensorInfo): GPUTensor {
    const t = this.store.get(info.name);
    if (t) {
      if (t.bytes !== numel(info.shape) * 4)
        throw new WebGPUError(`tensor '${info.name}' exists with a different size (${t.bytes} bytes)`);
      return t;
    }
    const created = this.createBuffer(info, info.name);
    this.store.set(info.name, created);
    return created;
  }

  // Sets (creating if needed) a persistent tensor, e.g. a parameter from a checkpoint.
  setPersistent(
    name: string,
    shape: number[],
    data: Float32Array | Int32Array,
    kind: TensorInfo['kind'] = 'parameter',
  ): void {
    this.check();
    if (data.length !== numel(shape))
      throw new WebGPUError(`tensor '${name}': ${data.length} values for shape [${shape}]`);
    const t = this.persistent({
      name,
      kind,
      dtype: data instanceof Int32Array ? 'i32' : 'f32',
      shape,
      trainable: kind === 'parameter',
    });
    this.device.queue.writeBuffer(t.buffer, 0, data.buffer, data.byteOffset, data.byteLength);
  }

  // Loads every tensor of a checkpoint (parameters and, when present, optim.m.* / optim.v.*).
  loadWeights(tensors: { name: string; shape: number[]; data: Float32Array | Int32Array }[]): void {
    for (const t of tensors)
      this.setPersistent(t.name, t.shape, t.data, t.name.startsWith('optim.') ? 'optim_state' : 'parameter');
  }

  // ---- readback ------------------------------------------------------------------------------

  private acquireStaging(size: number): GPUBuffer {
    const i = this.staging.findIndex((b) => b.size >= size);
    if (i >= 0) return this.staging.splice(i, 1)[0]!;
    return this.device.createBuffer({
      label: 'staging',
      size: Math.max(256, Math.ceil(size / 256) * 256),
      usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST,
    });
  }

  private releaseStaging(b: GPUBuffer): void {
    this.staging.push(b);
  }

  // Copies `sources` into one staging buffer on `encoder`; returns a function that, once the
  // encoder's commands are submitted, maps the buffer and resolves with copies of the data.
  encodeReadback(
    encoder: GPUCommandEncoder,
    sources: GPUTensor[],
  ): () => Promise<Map<string, Float32Array | Int32Array>> {
    const offsets: number[] = [];
    let total = 0;
    for (const s of sources) {
      offsets.push(total);
      total += Math.ceil(s.bytes / 4) * 4;
    }
    const staging = this.acquireStaging(Math.max(4, total));
    sources.forEach((s, k) =>
      encoder.copyBufferToBuffer(s.buffer, 0, staging, offsets[k]!, Math.ceil(s.bytes / 4) * 4),
    );
    return async () => {
      try {
        await staging.mapAsync(GPUMapMode.READ, 0, staging.size);
      } catch (e) {
        this.check();
        throw new WebGPUError(
          `reading back ${sources.map((s) => s.info.name).join(', ')} failed: ${(e as Error).message}`,
        );
      }
      const mapped = staging.getMappedRange(0, staging.size);
      const out = new Map<string, Float32Array | Int32Array>();
      sources.forEach((s, k) => {
        const src = mapped.slice(offsets[k]!, offsets[k]! + s.bytes);
        out.set(s.info.name, s.info.dtype === 'i32' ? new Int32Array(src) : new Float32Array(src));
      });
      staging.unmap();
      this.releaseStaging(staging);
      return out;
    };
  }

  // Reads tensors now (waits for the GPU): for tests, debugging and checkpoint export.
  async read(tensors: GPUTensor[]): Promise<Map<string, Float32Array | Int32Array>> {
    this.check();
    const encoder = this.device.createCommandEncoder({ label: 'read' });
    const finish = this.encodeReadback(encoder, tensors);
    this.submitChecked([encoder.finish()], 'read');
    const r = await finish();
    this.check();
    return r;
  }

  async readPersistent(name: string): Promise<Float32Array | Int32Array> {
    const t = this.store.get(name);
    if (!t) throw new WebGPUError(`no persistent tensor '${name}'`);
    return (await this.read([t])).get(name)!;
  }

  // Submits inside validation and out-of-memory error scopes without waiting for them: a failure
  // is recorded and thrown by the next call.
  submitChecked(buffers: GPUCommandBuffer[], what: string): void {
    this.device.pushErrorScope('out-of-memory');
    this.device.pushErrorScope('validation');
    this.device.queue.submit(buffers);
    const onError = (kind: string) => (e: GPUError | null) => {
      if (e) this.fail(`${what}: WebGPU ${kind} error: ${e.message}`);
    };
    void this.device.popErrorScope().then(onError('validation'));
    void this.device.popErrorScope().then(onError('out-of-memory'));
  }

  // ---- pipelines -----------------------------------------------------------------------------

  private async module(
    kernel: string,
    defines: Record<string, number>,
    includes: IncludeAliases,
  ): Promise<GPUShaderModule> {
    const key = `${kernel}|${JSON.stringify(defines)}|${JSON.stringify(includes)}`;
    let m = this.modules.get(key);
    if (!m) {
      let code: string;
      try {
        code =
          kernel === 'linear_tiled'
            ? sourceWithIncludes(kernel, linearTiledSource(tiledFromDefines(defines)), this.kernels, includes)
            : specialise(withIncludes(kernel, this.kernels, includes), defines);
      } catch (e) {
        throw new WebGPUError(`kernel '${kernel}': ${(e as Error).message}`);
      }
      // Compile errors are taken from a validation error scope: the message carries line and
      // column. (getCompilationInfo() crashes Dawn's Node binding on a module with errors.)
      this.device.pushErrorScope('validation');
      m = this.device.createShaderModule({ label: `${kernel}.wgsl`, code });
      const err = await this.device.popErrorScope();
      if (err)
        throw new WebGPUError(
          `WGSL compile error in kernels/${kernel}.wgsl ${JSON.stringify(defines)}${aliasNote(includes)}:\n${err.message}`,
        );
      this.modules.set(key, m);
    }
    return m;
  }

  layout(bindings: { binding: number; access: Access }[]): GPUBindGroupLayout {
    const key = bindings.map((b) => `${b.binding}${b.access}`).join(',');
    let l = this.layouts.get(key);
    if (!l) {
      l = this.device.createBindGroupLayout({
        label: key,
        entries: [
          { binding: 0, visibility: GPUShaderStage.COMPUTE, buffer: { type: 'uniform' } },
          ...bindings.map((b) => ({
            binding: b.binding,
            visibility: GPUShaderStage.COMPUTE,
            buffer: { type: (b.access === 'w' ? 'storage' : 'read-only-storage') as GPUBufferBindingType },
          })),
        ],
      });
      this.layouts.set(key, l);
    }
    return l;
  }

  // One pipeline per (kernel, entry point, defines, include aliases, override constants, binding layout).
  pipeline(spec: DispatchSpec): Promise<GPUComputePipeline> {
    const defines = spec.defines ?? {};
    const includes = spec.includes ?? {};
    const constants = spec.constants ?? {};
    const layoutKey = spec.bindings.map((b) => `${b.binding}${b.access}`).join(',');
    const key = `${spec.kernel}|${spec.entry}|${JSON.stringify(defines)}|${JSON.stringify(includes)}|${JSON.stringify(constants)}|${layoutKey}`;
    let p = this.pipelines.get(key);
    if (!p) {
      p = (async () => {
        const module = await this.module(spec.kernel, defines, includes);
        const layout = this.device.createPipelineLayout({ bindGroupLayouts: [this.layout(spec.bindings)] });
        try {
          return await this.device.createComputePipelineAsync({
            label: `${spec.kernel}.${spec.entry}`,
            layout,
            compute: { module, entryPoint: spec.entry, constants },
          });
        } catch (e) {
          throw new WebGPUError(
            `cannot create pipeline ${spec.kernel}.wgsl:${spec.entry} ${JSON.stringify(constants)}${aliasNote(includes)}: ${(e as Error).message}`,
          );
        }
      })();
      this.pipelines.set(key, p);
      p.catch(() => this.pipelines.delete(key));
      this.onPipelineProgress?.(this.pipelinesReady, this.pipelines.size);
      p.then(
        () => this.onPipelineProgress?.(++this.pipelinesReady, this.pipelines.size),
        () => {},
      );
    }
    return p;
  }

  get pipelineCount(): number {
    return this.pipelines.size;
  }

  // Loads a program: allocates its tensors, plans and prepares every dispatch.
  // share = false gives every tensor a buffer of its own (Executor's constructor).
  async load(program: string | ProgramJSON, share = true): Promise<Executor> {
    this.check();
    const ex = new Executor(this, parseProgram(program), share);
    try {
      await ex.prepare();
    } catch (e) {
      ex.destroy();
      throw e;
    }
    return ex;
  }

  // Frees the persistent tensors (every program loaded on this backend becomes unusable).
  clearStore(): void {
    for (const t of this.store.values()) t.buffer.destroy();
    this.store.clear();
  }

  destroy(): void {
    this.clearStore();
    for (const b of this.staging) b.destroy();
    this.staging.length = 0;
  }
}

// ---------------------------------------------------------------------------------------------

// ---- planning: one planner per op kind ------------------------------------------------------
//
// The counterpart of run_op in engine/backends/cpu/cpu_backend.cpp: a table keyed by op kind of
// functions that turn one op of the program into the dispatches that compute it (kernel, entry
// point, specialisation, uniform parameters, bindings, workgroup counts). Planning happens once,
// when a program is loaded; nothing here touches the GPU beyond creating scratch buffers.

type MatmulDims = {
  I: number;
  J: number;
  P: number;
  transA: boolean;
  lda: number;
  transB: boolean;
  ldb: number;
  ldc: number;
};

// linear.wgsl's specialisation constants for a product (every entry point reads the same ones).
function linearConstants(d: MatmulDims, hasBias: boolean, accumulate: boolean, split: boolean): Record<string, number> {
  return {
    TRANS_A: d.transA ? 1 : 0,
    TRANS_B: d.transB ? 1 : 0,
    ALIGNED_A: d.lda % 4 === 0 ? 1 : 0,
    ALIGNED_B: d.ldb % 4 === 0 ? 1 : 0,
    HAS_BIAS: hasBias ? 1 : 0,
    ACC: accumulate ? 1 : 0,
    SPLIT: split ? 1 : 0,
  };
}

// What a planner sees: its op (tensor ids by position, -1 = absent), binding makers, and the
// executor's shapes, range checks and variant choices.
interface PlanContext {
  readonly op: OpInfo;
  readonly label: string; // `op <index> <kind>`: every dispatch label and error message starts with it
  readonly backend: WebGPUBackend;
  inp(i: number): number; // tensor id of input i, -1 when absent
  out(i: number): number; // tensor id of output i, -1 when not needed
  acc(i: number): boolean; // output i accumulates (attribute acc<i>)
  need(id: number, what: string): number; // the id, or an error naming the missing tensor
  r(binding: number, id: number): BindingSpec; // read binding (a placeholder for an absent input)
  w(binding: number, id: number): BindingSpec; // write binding (a distinct placeholder for each absent output)
  shape(id: number): number[];
  numel(id: number): number;
  name(id: number): string;
  bound(id: number, bound: number, why: (value: number, index: number) => string): void; // host range check of an i32 input
  grid(count: number): [number, number, number]; // `count` workgroups as a 2-D grid
  elementwise(n: number): [number, number, number]; // one thread per element, 256 per workgroup
  scratch(floats: number, label: string): GPUBuffer;
  // Rows [first, first + count) of a tensor with `width` floats per row, as a binding of its own
  // (the row offset must make a multiple of 256 bytes).
  rows(binding: number, id: number, access: Access, first: number, count: number, width: number): BindingSpec;
  vocabChunk(M: number, V: number): number; // vocabulary rows per chunk of cross_entropy_tied
  logitsChunk(access: Access, binding: number, floats: number): BindingSpec; // the chunk's scratch, shared by the program's ops
  readDummy(): GPUBuffer;
  rowReductions(): IncludeAliases;
  rowsPerWorkgroup(): number;
  headSize(C: number, H: number): number;
  matmul(
    label: string,
    d: MatmulDims,
    a: BindingSpec,
    b: BindingSpec,
    bias: BindingSpec,
    c: BindingSpec,
    hasBias: boolean,
    accumulate: boolean,
  ): DispatchSpec[];
  adamwSlot(attrs: Record<string, number>): number;
}
type Planner = (c: PlanContext) => DispatchSpec[];

const b1 = (v: boolean): number => (v ? 1 : 0);

// embedding: x = tok_emb[tokens] + pos_emb[pos0 + t]; token ids and pos0 are range-checked on the host.
function planEmbedding(c: PlanContext): DispatchSpec[] {
  const { label, inp, out, need, r, w, elementwise } = c;
  const tokens = need(inp(0), 'tokens'),
    tokEmb = need(inp(1), 'tok_emb'),
    posEmb = need(inp(2), 'pos_emb');
  const [B, T] = c.shape(tokens) as [number, number];
  const [V, C] = c.shape(tokEmb) as [number, number];
  c.bound(tokens, V, (x, i) => `id ${x} at index ${i} is outside the vocabulary [0, ${V})`);
  if (c.shape(posEmb)[0]! < T) throw new WebGPUError(`${label}: ${T} positions but pos_emb has ${c.shape(posEmb)[0]}`);
  const P = c.shape(posEmb)[0]!;
  if (inp(3) >= 0)
    c.bound(inp(3), P - T + 1, (x) => `pos0 = ${x}: positions ${x} .. ${x + T - 1} are outside pos_emb's ${P} rows`);
  const n = B * T * C;
  return [
    {
      kernel: 'embedding',
      entry: 'main',
      label,
      constants: { HAS_POS0: b1(inp(3) >= 0) },
      params: [u(n), u(T), u(C), u(0)],
      bindings: [r(1, tokens), r(2, tokEmb), r(3, posEmb), r(4, inp(3)), w(5, need(out(0), 'x'))],
      workgroups: elementwise(n),
    },
  ];
}

// embedding_backward: d tok_emb (one workgroup per vocabulary row) and d pos_emb, each only when asked for.
function planEmbeddingBackward(c: PlanContext): DispatchSpec[] {
  const { label, inp, out, acc, need, r, w, elementwise } = c;
  const dx = need(inp(0), 'dx'),
    tokens = need(inp(1), 'tokens');
  const [B, T] = c.shape(tokens) as [number, number];
  const C = c.shape(dx).at(-1)!;
  const dtok = out(0),
    dpos = out(1);
  const V = dtok >= 0 ? c.shape(dtok)[0]! : 0,
    ctx = dpos >= 0 ? c.shape(dpos)[0]! : 0;
  const params = [u(B * T), u(T), u(C), u(V), u(ctx), u(0), u(0), u(0)];
  const constants = { HAS_POS0: b1(inp(2) >= 0), ACC_TOK: b1(acc(0)), ACC_POS: b1(acc(1)) };
  const specs: DispatchSpec[] = [];
  if (dtok >= 0)
    specs.push({
      kernel: 'embedding_backward',
      entry: 'dtok_main',
      label: `${label} dtok`,
      constants,
      params,
      bindings: [r(1, dx), r(2, tokens), w(4, dtok)],
      workgroups: c.grid(V),
    });
  if (dpos >= 0)
    specs.push({
      kernel: 'embedding_backward',
      entry: 'dpos_main',
      label: `${label} dpos`,
      constants,
      params,
      bindings: [r(1, dx), r(3, inp(2)), w(5, dpos)],
      workgroups: elementwise(ctx * C),
    });
  return specs;
}

// layernorm: one workgroup per row; mean and rstd are kept for the backward when asked for.
function planLayernorm(c: PlanContext): DispatchSpec[] {
  const { op, label, inp, out, need, r, w } = c;
  const x = need(inp(0), 'x');
  const C = c.shape(x).at(-1)!,
    N = c.numel(x) / C;
  return [
    {
      kernel: 'layernorm',
      entry: 'main',
      label,
      includes: c.rowReductions(),
      constants: { HAS_MEAN: b1(out(1) >= 0), HAS_RSTD: b1(out(2) >= 0) },
      params: [u(N), u(C), f(op.attrs['eps'] ?? 1e-5), u(0)],
      bindings: [
        r(1, x),
        r(2, need(inp(1), 'w')),
        r(3, need(inp(2), 'b')),
        w(4, need(out(0), 'y')),
        w(5, out(1)),
        w(6, out(2)),
      ],
      workgroups: c.grid(N),
    },
  ];
}

// layernorm_backward: dx per row, dw/db per column block: two entries of one module.
function planLayernormBackward(c: PlanContext): DispatchSpec[] {
  const { label, inp, out, acc, need, r, w } = c;
  const dy = need(inp(0), 'dy'),
    x = need(inp(1), 'x'),
    wt = need(inp(2), 'w');
  const mean = need(inp(3), 'mean'),
    rstd = need(inp(4), 'rstd');
  const C = c.shape(x).at(-1)!,
    N = c.numel(x) / C;
  const params = [u(N), u(C), u(0), u(0)];
  const constants = {
    ACC_DX: b1(acc(0)),
    ACC_DW: b1(acc(1)),
    ACC_DB: b1(acc(2)),
    HAS_DW: b1(out(1) >= 0),
    HAS_DB: b1(out(2) >= 0),
  };
  // Both entries from one module (dwdb_main does not reduce over a row, but shares the file).
  const includes = c.rowReductions();
  const specs: DispatchSpec[] = [];
  if (out(0) >= 0)
    specs.push({
      kernel: 'layernorm_backward',
      entry: 'dx_main',
      label: `${label} dx`,
      includes,
      constants,
      params,
      bindings: [r(1, dy), r(2, x), r(3, wt), r(4, mean), r(5, rstd), w(6, out(0))],
      workgroups: c.grid(N),
    });
  if (out(1) >= 0 || out(2) >= 0)
    specs.push({
      kernel: 'layernorm_backward',
      entry: 'dwdb_main',
      label: `${label} dw/db`,
      includes,
      constants,
      params,
      bindings: [r(1, dy), r(2, x), r(4, mean), r(5, rstd), w(7, out(1)), w(8, out(2))],
      workgroups: [ceilDiv(C, 32), 1, 1],
    });
  return specs;
}

// linear: y = x W^T (+ b): one matrix product.
function planLinear(c: PlanContext): DispatchSpec[] {
  const { label, inp, out, need, r, w } = c;
  const x = need(inp(0), 'x'),
    W = need(inp(1), 'W');
  const K = c.shape(x).at(-1)!,
    M = c.numel(x) / K,
    N = c.shape(W)[0]!;
  if (c.shape(W)[1] !== K) throw new WebGPUError(`${label}: W is [${c.shape(W)}] for inputs of width ${K}`);
  return c.matmul(
    `${label}`,
    { I: M, J: N, P: K, transA: false, lda: K, transB: true, ldb: K, ldc: N },
    r(1, x),
    r(2, W),
    r(3, inp(2)),
    w(4, need(out(0), 'y')),
    inp(2) >= 0,
    false,
  );
}

// linear_backward: dx = dy W, dW = dy^T x (matrix products) and db (column sums of dy), each when asked for.
function planLinearBackward(c: PlanContext): DispatchSpec[] {
  const { label, inp, out, acc, need, r, w } = c;
  const dy = need(inp(0), 'dy'),
    x = need(inp(1), 'x'),
    W = need(inp(2), 'W');
  const K = c.shape(x).at(-1)!,
    M = c.numel(x) / K,
    N = c.shape(W)[0]!;
  const specs: DispatchSpec[] = [];
  if (out(0) >= 0)
    specs.push(
      ...c.matmul(
        `${label} dx`,
        { I: M, J: K, P: N, transA: false, lda: N, transB: false, ldb: K, ldc: K },
        r(1, dy),
        r(2, W),
        r(3, -1),
        w(4, out(0)),
        false,
        acc(0),
      ),
    );
  if (out(1) >= 0)
    specs.push(
      ...c.matmul(
        `${label} dW`,
        { I: N, J: K, P: M, transA: true, lda: N, transB: false, ldb: K, ldc: K },
        r(1, dy),
        r(2, x),
        r(3, -1),
        w(4, out(1)),
        false,
        acc(1),
      ),
    );
  if (out(2) >= 0)
    specs.push({
      kernel: 'linear_backward',
      entry: 'bias_grad',
      label: `${label} db`,
      constants: { ACC: b1(acc(2)) },
      params: [u(M), u(N), u(0), u(0)],
      bindings: [r(1, dy), w(2, out(2))],
      workgroups: [ceilDiv(N, 32), 1, 1],
    });
  return specs;
}

// attention: causal attention, blocks of BQ query rows per workgroup, K/V tiles in workgroup memory.
function planAttention(c: PlanContext): DispatchSpec[] {
  const { op, label, inp, out, need, r, w } = c;
  const q = need(inp(0), 'q');
  const [B, T, C] = c.shape(q) as [number, number, number];
  const H = op.attrs['heads'] ?? 0;
  const HS = c.headSize(C, H);
  let BKV = 16;
  while (2 * BKV * HS * 4 > c.backend.device.limits.maxComputeWorkgroupStorageSize && BKV > 1) BKV /= 2;
  const BQ = c.rowsPerWorkgroup();
  const drop = dropoutAttrs(c, 3);
  return [
    {
      kernel: 'attention',
      entry: 'main',
      label,
      defines: { HS, BKV, BQ },
      constants: { HAS_LSE: b1(out(1) >= 0), HAS_DROPOUT: b1(drop.on) },
      params: [u(B), u(T), u(C), u(H), f(Math.fround(1 / Math.sqrt(HS))), ...drop.params],
      bindings: [
        r(1, q),
        r(2, need(inp(1), 'k')),
        r(3, need(inp(2), 'v')),
        w(4, need(out(0), 'y')),
        w(5, out(1)),
        r(6, inp(3)),
      ],
      workgroups: [ceilDiv(T, BQ), B * H, 1],
    },
  ];
}

// The dropout attributes of an op (docs/model.md "Dropout"): the kernels' uniform words
// [threshold, scale, stream] and whether the mask is applied at all (p > 0 with a dropout.seed
// input at `seedInput`). threshold and stream are integers the program stores exactly.
function dropoutAttrs(c: PlanContext, seedInput: number): { on: boolean; params: ParamWord[] } {
  const a = c.op.attrs;
  const p = a['p'] ?? 0;
  const threshold = a['threshold'] ?? 0;
  const scale = a['scale'] ?? 1;
  const stream = a['stream'] ?? 0;
  const seed = c.inp(seedInput);
  const on = p > 0 || threshold > 0;
  if (!on) return { on, params: [u(0), f(1), u(0)] };
  if (!(p < 1) || !Number.isInteger(threshold) || threshold < 0 || threshold > 16777216)
    throw new WebGPUError(`${c.label}: dropout p = ${p}, threshold = ${threshold} out of range`);
  if (!Number.isInteger(stream) || stream < 0 || stream > 0xffffffff)
    throw new WebGPUError(`${c.label}: dropout stream ${stream} is not a u32`);
  if (seed < 0) throw new WebGPUError(`${c.label}: dropout p = ${p} without a dropout.seed input`);
  if (c.numel(seed) !== 2) throw new WebGPUError(`${c.label}: dropout.seed has ${c.numel(seed)} values, not 2`);
  return { on, params: [u(threshold), f(scale), u(stream)] };
}

// dropout: y = x scale where kept, 0 where dropped; the mask is a function of dropout.seed.
function planDropout(c: PlanContext): DispatchSpec[] {
  const { label, inp, out, need, r, w, elementwise } = c;
  const x = need(inp(0), 'x'),
    n = c.numel(x);
  need(inp(1), 'dropout.seed');
  const drop = dropoutAttrs(c, 1);
  return [
    {
      kernel: 'dropout',
      entry: 'main',
      label,
      params: [u(n), ...drop.params],
      bindings: [r(1, x), r(2, inp(1)), w(3, need(out(0), 'y'))],
      workgroups: elementwise(n),
    },
  ];
}

// dropout_backward: dx (+)= dy scale where the forward kept the element (the mask regenerated).
function planDropoutBackward(c: PlanContext): DispatchSpec[] {
  const { label, inp, out, acc, need, r, w, elementwise } = c;
  const dy = need(inp(0), 'dy'),
    n = c.numel(dy);
  need(inp(1), 'dropout.seed');
  if (out(0) < 0) return [];
  const drop = dropoutAttrs(c, 1);
  return [
    {
      kernel: 'dropout_backward',
      entry: 'main',
      label,
      constants: { ACC: b1(acc(0)) },
      params: [u(n), ...drop.params],
      bindings: [r(1, dy), r(2, inp(1)), w(3, out(0))],
      workgroups: elementwise(n),
    },
  ];
}

// attention_backward: dq from query blocks, dk/dv from key blocks.
function planAttentionBackward(c: PlanContext): DispatchSpec[] {
  const { op, label, inp, out, acc, need, r, w } = c;
  const ins = [0, 1, 2, 3, 4, 5].map((i) => need(inp(i), ['dy', 'q', 'k', 'v', 'y', 'lse'][i]!));
  const [B, T, C] = c.shape(ins[1]!) as [number, number, number];
  const H = op.attrs['heads'] ?? 0;
  const HS = c.headSize(C, H);
  let BT = 16;
  while ((2 * BT * HS + 2 * BT) * 4 > c.backend.device.limits.maxComputeWorkgroupStorageSize && BT > 1) BT /= 2;
  const drop = dropoutAttrs(c, 6);
  const params = [u(B), u(T), u(C), u(H), f(Math.fround(1 / Math.sqrt(HS))), ...drop.params];
  const WG = c.rowsPerWorkgroup();
  const constants = {
    HAS_DROPOUT: b1(drop.on),
    ACC_DQ: b1(acc(0)),
    ACC_DK: b1(acc(1)),
    ACC_DV: b1(acc(2)),
    HAS_DK: b1(out(1) >= 0),
    HAS_DV: b1(out(2) >= 0),
  };
  const inputs = [...ins.map((id, i) => r(i + 1, id)), r(10, inp(6))];
  const specs: DispatchSpec[] = [];
  if (out(0) >= 0)
    specs.push({
      kernel: 'attention_backward',
      entry: 'dq_main',
      label: `${label} dq`,
      defines: { HS, BT, WG },
      constants,
      params,
      bindings: [...inputs, w(7, out(0))],
      workgroups: [ceilDiv(T, WG), B * H, 1],
    });
  if (out(1) >= 0 || out(2) >= 0)
    specs.push({
      kernel: 'attention_backward',
      entry: 'dkdv_main',
      label: `${label} dk/dv`,
      defines: { HS, BT, WG },
      constants,
      params,
      bindings: [...inputs, w(8, out(1)), w(9, out(2))],
      workgroups: [ceilDiv(T, WG), B * H, 1],
    });
  return specs;
}

// kv_cache_write: generation writes the step's k and v rows into the caches at pos0.
function planKvCacheWrite(c: PlanContext): DispatchSpec[] {
  const { label, inp, out, need, r, w, elementwise } = c;
  const kk = need(inp(0), 'k'),
    vv = need(inp(1), 'v'),
    pos0 = need(inp(2), 'pos0');
  const kc = need(out(0), 'k_cache'),
    vc = need(out(1), 'v_cache');
  const C = c.shape(kk).at(-1)!,
    n = c.numel(kk) / C,
    ctx = c.shape(kc)[0]!;
  if (c.numel(vv) !== n * C || c.shape(kc).at(-1) !== C || c.numel(vc) !== c.numel(kc))
    throw new WebGPUError(
      `${label}: k [${c.shape(kk)}], v [${c.shape(vv)}] do not fit the caches [${c.shape(kc)}], [${c.shape(vc)}]`,
    );
  if (n > ctx) throw new WebGPUError(`${label}: ${n} rows do not fit a cache of ${ctx}`);
  c.bound(pos0, ctx - n + 1, (x) => `pos0 = ${x}: rows ${x} .. ${x + n - 1} are outside the KV cache of ${ctx} rows`);
  return [
    {
      kernel: 'kv_cache_write',
      entry: 'main',
      label,
      constants: { C },
      params: [u(n * C), u(0), u(0), u(0)],
      bindings: [r(1, kk), r(2, vv), r(3, pos0), w(4, kc), w(5, vc)],
      workgroups: elementwise(n * C),
    },
  ];
}

// attention_cached: generation's attention of the new rows over the cached k and v, one workgroup per (row, head).
function planAttentionCached(c: PlanContext): DispatchSpec[] {
  const { op, label, inp, out, need, r, w } = c;
  const q = need(inp(0), 'q'),
    kc = need(inp(1), 'k_cache'),
    vc = need(inp(2), 'v_cache'),
    pos0 = need(inp(3), 'pos0');
  const C = c.shape(q).at(-1)!,
    n = c.numel(q) / C,
    ctx = c.shape(kc)[0]!;
  const H = op.attrs['heads'] ?? 0;
  const HS = c.headSize(C, H);
  if (c.shape(kc).at(-1) !== C || c.numel(vc) !== c.numel(kc))
    throw new WebGPUError(`${label}: caches [${c.shape(kc)}], [${c.shape(vc)}] do not match q [${c.shape(q)}]`);
  c.bound(pos0, ctx - n + 1, (x) => `pos0 = ${x}: rows ${x} .. ${x + n - 1} are outside the KV cache of ${ctx} rows`);
  if (n > c.backend.maxWorkgroups) throw new WebGPUError(`${label}: ${n} query rows are more than one dispatch holds`);
  return [
    {
      kernel: 'attention_cached',
      entry: 'main',
      label,
      defines: { HS, CPT: ceilDiv(HS, 64) },
      params: [u(n), u(C), u(H), f(Math.fround(1 / Math.sqrt(HS)))],
      bindings: [r(1, q), r(2, kc), r(3, vc), r(4, pos0), w(5, need(out(0), 'y'))],
      workgroups: [n, H, 1],
    },
  ];
}

// slice_rows: rows first .. first + n of x (generation over a prompt: the last position only).
function planSliceRows(c: PlanContext): DispatchSpec[] {
  const { op, label, inp, out, need, r, w, elementwise } = c;
  const x = need(inp(0), 'x'),
    y = need(out(0), 'y');
  const C = c.shape(x).at(-1)!,
    rows = c.numel(x) / C,
    n = c.numel(y) / C,
    first = op.attrs['first'] ?? 0;
  if (c.shape(y).at(-1) !== C || !Number.isInteger(n) || n < 1)
    throw new WebGPUError(`${label}: y [${c.shape(y)}] is not rows of x's width ${C}`);
  if (!Number.isInteger(first) || first < 0 || first + n > rows)
    throw new WebGPUError(`${label}: rows ${first} .. ${first + n - 1} are outside x's ${rows} rows`);
  return [
    {
      kernel: 'slice_rows',
      entry: 'main',
      label,
      params: [u(n * C), u(first * C), u(0), u(0)],
      bindings: [r(1, x), w(2, y)],
      workgroups: elementwise(n * C),
    },
  ];
}

// attention_probs: the attention weights themselves ([B, H, T, T]), for inspection.
function planAttentionProbs(c: PlanContext): DispatchSpec[] {
  const { op, label, inp, out, need, r, w } = c;
  const q = need(inp(0), 'q'),
    kk = need(inp(1), 'k'),
    probs = need(out(0), 'probs');
  const [B, T, C] = c.shape(q) as [number, number, number];
  const H = op.attrs['heads'] ?? 0;
  const HS = c.headSize(C, H);
  if (c.numel(kk) !== B * T * C) throw new WebGPUError(`${label}: k [${c.shape(kk)}] does not match q [${c.shape(q)}]`);
  if (c.numel(probs) !== B * H * T * T)
    throw new WebGPUError(`${label}: probs [${c.shape(probs)}] is not [${B}, ${H}, ${T}, ${T}]`);
  if (T > c.backend.maxWorkgroups || B * H > c.backend.maxWorkgroups)
    throw new WebGPUError(`${label}: [${B}, ${H}, ${T}] rows are more than one dispatch holds`);
  return [
    {
      kernel: 'attention_probs',
      entry: 'main',
      label,
      defines: { HS },
      params: [u(T), u(C), u(H), f(Math.fround(1 / Math.sqrt(HS)))],
      bindings: [r(1, q), r(2, kk), w(3, probs)],
      workgroups: [T, B * H, 1],
    },
  ];
}

// gelu: elementwise; attribute tanh = 1 selects GPT-2's form.
function planGelu(c: PlanContext): DispatchSpec[] {
  const { op, label, inp, out, need, r, w, elementwise } = c;
  const x = need(inp(0), 'x'),
    n = c.numel(x);
  return [
    {
      kernel: 'gelu',
      entry: 'main',
      label,
      constants: { TANH: b1((op.attrs['tanh'] ?? 0) !== 0) },
      params: [u(n), u(0), u(0), u(0)],
      bindings: [r(1, x), w(2, need(out(0), 'y'))],
      workgroups: elementwise(n),
    },
  ];
}

// gelu_backward: elementwise; nothing to do when the gradient is not needed.
function planGeluBackward(c: PlanContext): DispatchSpec[] {
  const { op, label, inp, out, acc, need, r, w, elementwise } = c;
  const dy = need(inp(0), 'dy'),
    n = c.numel(dy);
  if (out(0) < 0) return [];
  return [
    {
      kernel: 'gelu_backward',
      entry: 'main',
      label,
      constants: { ACC: b1(acc(0)), TANH: b1((op.attrs['tanh'] ?? 0) !== 0) },
      params: [u(n), u(0), u(0), u(0)],
      bindings: [r(1, dy), r(2, need(inp(1), 'x')), w(3, out(0))],
      workgroups: elementwise(n),
    },
  ];
}

// add: y = a + alpha b, elementwise.
function planAdd(c: PlanContext): DispatchSpec[] {
  const { op, label, inp, out, need, r, w, elementwise } = c;
  const a = need(inp(0), 'a'),
    n = c.numel(a);
  return [
    {
      kernel: 'add',
      entry: 'main',
      label,
      params: [u(n), f(op.attrs['alpha'] ?? 1), u(0), u(0)],
      bindings: [r(1, a), r(2, need(inp(1), 'b')), w(3, need(out(0), 'y'))],
      workgroups: elementwise(n),
    },
  ];
}

// add_backward: da = dy, db = alpha dy, each when asked for.
function planAddBackward(c: PlanContext): DispatchSpec[] {
  const { op, label, inp, out, acc, need, r, w, elementwise } = c;
  const dy = need(inp(0), 'dy'),
    n = c.numel(dy);
  if (out(0) < 0 && out(1) < 0) return [];
  return [
    {
      kernel: 'add_backward',
      entry: 'main',
      label,
      constants: { HAS_DA: b1(out(0) >= 0), HAS_DB: b1(out(1) >= 0), ACC_A: b1(acc(0)), ACC_B: b1(acc(1)) },
      params: [u(n), f(op.attrs['alpha'] ?? 1), u(0), u(0)],
      bindings: [r(1, dy), w(2, out(0)), w(3, out(1))],
      workgroups: elementwise(n),
    },
  ];
}

// cross_entropy: per-row losses (and log-sum-exp), then their masked mean in one more dispatch.
function planCrossEntropy(c: PlanContext): DispatchSpec[] {
  const { label, inp, out, need, r, w } = c;
  const logits = need(inp(0), 'logits'),
    targets = need(inp(1), 'targets');
  const [M, V] = c.shape(logits) as [number, number];
  c.bound(targets, V, (x, i) => `id ${x} at index ${i} is outside the vocabulary [0, ${V})`);
  const rowloss = c.scratch(M, `${label} row losses`);
  const params = [u(M), u(V), u(0), u(0)];
  const constants = { HAS_MASK: b1(inp(2) >= 0), HAS_LSE: b1(out(1) >= 0) };
  const rl = (binding: number): BindingSpec => ({ binding, buffer: rowloss, access: 'w', what: 'row losses' });
  const specs: DispatchSpec[] = [
    {
      kernel: 'cross_entropy',
      entry: 'rows_main',
      label: `${label} rows`,
      constants,
      params,
      bindings: [r(1, logits), r(2, targets), r(3, inp(2)), w(4, out(1)), rl(5)],
      workgroups: c.grid(M),
    },
  ];
  if (out(0) >= 0)
    specs.push({
      kernel: 'cross_entropy',
      entry: 'total_main',
      label: `${label} total`,
      constants,
      params,
      bindings: [r(3, inp(2)), rl(5), w(6, out(0))],
      workgroups: [1, 1, 1],
    });
  return specs;
}

// cross_entropy_backward: d logits = (softmax - one-hot) * mask / sum(mask), one workgroup per row.
function planCrossEntropyBackward(c: PlanContext): DispatchSpec[] {
  const { label, inp, out, acc, need, r, w } = c;
  const logits = need(inp(0), 'logits');
  const [M, V] = c.shape(logits) as [number, number];
  if (out(0) < 0) return [];
  return [
    {
      kernel: 'cross_entropy_backward',
      entry: 'main',
      label,
      constants: { HAS_LSE: b1(inp(2) >= 0), HAS_MASK: b1(inp(3) >= 0), ACC: b1(acc(0)) },
      params: [u(M), u(V), u(0), u(0)],
      bindings: [r(1, logits), r(2, need(inp(1), 'targets')), r(3, inp(2)), r(4, inp(3)), w(5, out(0))],
      workgroups: c.grid(M),
    },
  ];
}

// The vocabulary chunks [v0, n] of cross_entropy_tied (C++ twin: kernels/cross_entropy_tied.cpp).
function vocabChunks(c: PlanContext, M: number, V: number): [number, number][] {
  const n = c.vocabChunk(M, V);
  const chunks: [number, number][] = [];
  for (let v0 = 0; v0 < V; v0 += n) chunks.push([v0, Math.min(n, V - v0)]);
  return chunks;
}

// The shapes of cross_entropy_tied and its backward: x [.., C] (M rows), W [V, C].
function tiedShapes(c: PlanContext): { x: number; W: number; M: number; V: number; C: number } {
  const x = c.need(c.inp(0), 'x'),
    W = c.need(c.inp(1), 'W');
  const C = c.shape(x).at(-1)!,
    M = c.numel(x) / C;
  const [V, CW] = c.shape(W) as [number, number];
  if (CW !== C) throw new WebGPUError(`${c.label}: W is [${c.shape(W)}] for inputs of width ${C}`);
  c.bound(c.need(c.inp(2), 'targets'), V, (t, i) => `id ${t} at index ${i} is outside the vocabulary [0, ${V})`);
  return { x, W, M, V, C };
}

// One chunk's logits, x W[v0 .. v0 + n)^T, into the program's [M, n] logits scratch.
function chunkLogits(
  c: PlanContext,
  x: number,
  W: number,
  M: number,
  C: number,
  v0: number,
  n: number,
): DispatchSpec[] {
  return c.matmul(
    `${c.label} logits ${v0}`,
    { I: M, J: n, P: C, transA: false, lda: C, transB: true, ldb: C, ldc: n },
    c.r(1, x),
    c.rows(2, W, 'r', v0, n, C),
    c.r(3, -1),
    c.logitsChunk('w', 4, M * n),
    false,
    false,
  );
}

// cross_entropy_tied: the tied output projection and the cross-entropy without a [M, V] logits
// buffer. Per chunk of the vocabulary: its logits z_c = x W_c^T (a matrix product into a scratch
// buffer of M x chunk floats), then one workgroup per row folds them into the row's online
// log-sum-exp and picks the target's logit; the last chunk's rows write lse and their loss, which
// cross_entropy.wgsl's total_main averages.
function planCrossEntropyTied(c: PlanContext): DispatchSpec[] {
  const { label, inp, out, r, w } = c;
  const { x, W, M, V, C } = tiedShapes(c);
  if (M === 0 || V === 0) return [];
  const chunks = vocabChunks(c, M, V);
  const state = c.scratch(3 * M, `${label} running max, sum and target logit`);
  const rowloss = c.scratch(M, `${label} row losses`);
  const st = (binding: number): BindingSpec => ({ binding, buffer: state, access: 'w', what: 'row state' });
  const rl = (binding: number): BindingSpec => ({ binding, buffer: rowloss, access: 'w', what: 'row losses' });
  const constants = { HAS_MASK: b1(inp(3) >= 0), HAS_LSE: b1(out(1) >= 0) };
  const specs: DispatchSpec[] = [];
  chunks.forEach(([v0, n], k) => {
    specs.push(...chunkLogits(c, x, W, M, C, v0, n));
    specs.push({
      kernel: 'cross_entropy_tied',
      entry: 'chunk_main',
      label: `${label} rows ${v0}`,
      constants,
      params: [u(M), u(n), u(v0), u((k === 0 ? 1 : 0) | (k === chunks.length - 1 ? 2 : 0))],
      bindings: [c.logitsChunk('r', 1, M * n), r(2, inp(2)), r(3, inp(3)), w(4, out(1)), rl(5), st(6)],
      workgroups: c.grid(M),
    });
  });
  if (out(0) >= 0)
    specs.push({
      kernel: 'cross_entropy',
      entry: 'total_main',
      label: `${label} total`,
      constants,
      params: [u(M), u(V), u(0), u(0)],
      bindings: [r(3, inp(3)), rl(5), w(6, out(0))],
      workgroups: [1, 1, 1],
    });
  return specs;
}

// cross_entropy_tied_backward: per chunk of the vocabulary, the logits again (a matrix product),
// turned in place into dz_c = (softmax - onehot) * mask / sum(mask) from the forward's lse, then
// dx (+)= dz_c W_c and the chunk's rows of dW (+)= dz_c^T x (two more products).
function planCrossEntropyTiedBackward(c: PlanContext): DispatchSpec[] {
  const { label, inp, out, acc, need, r } = c;
  const { x, W, M, V, C } = tiedShapes(c);
  const lse = need(inp(3), 'lse'),
    mask = inp(4);
  const dx = out(0),
    dW = out(1);
  if (dx < 0 && dW < 0) return [];
  if (M === 0 || V === 0) throw new WebGPUError(`${label}: no rows or no vocabulary`);
  const count = c.scratch(1, `${label} sum of the mask`);
  const cw = (binding: number): BindingSpec => ({ binding, buffer: count, access: 'w', what: 'mask sum' });
  const constants = { HAS_MASK: b1(mask >= 0) };
  const specs: DispatchSpec[] = [];
  if (mask >= 0)
    specs.push({
      kernel: 'cross_entropy_tied_backward',
      entry: 'count_main',
      label: `${label} mask sum`,
      constants,
      params: [u(M), u(0), u(0), u(0)],
      bindings: [r(4, mask), cw(5)],
      workgroups: [1, 1, 1],
    });
  vocabChunks(c, M, V).forEach(([v0, n]) => {
    specs.push(...chunkLogits(c, x, W, M, C, v0, n));
    specs.push({
      kernel: 'cross_entropy_tied_backward',
      entry: 'main',
      label: `${label} dlogits ${v0}`,
      constants,
      params: [u(M), u(n), u(v0), u(0)],
      bindings: [c.logitsChunk('w', 1, M * n), r(2, inp(2)), r(3, lse), r(4, mask), cw(5)],
      workgroups: c.grid(M),
    });
    if (dx >= 0)
      specs.push(
        ...c.matmul(
          `${label} dx ${v0}`,
          { I: M, J: C, P: n, transA: false, lda: n, transB: false, ldb: C, ldc: C },
          c.logitsChunk('r', 1, M * n),
          c.rows(2, W, 'r', v0, n, C),
          r(3, -1),
          c.w(4, dx),
          false,
          acc(0) || v0 > 0,
        ),
      );
    if (dW >= 0)
      specs.push(
        ...c.matmul(
          `${label} dW ${v0}`,
          { I: n, J: C, P: M, transA: true, lda: n, transB: false, ldb: C, ldc: C },
          c.logitsChunk('r', 1, M * n),
          r(2, x),
          r(3, -1),
          c.rows(4, dW, 'w', v0, n, C),
          false,
          acc(1),
        ),
      );
  });
  return specs;
}

// grad_norm: sums of squares of every gradient in fixed chunks, then one workgroup adds the partial sums.
function planGradNorm(c: PlanContext): DispatchSpec[] {
  const { op, label, out, need, r, w } = c;
  const CHUNK = 2048;
  const groups = op.inputs.map((id) => (id >= 0 ? ceilDiv(c.numel(id), CHUNK) : 0));
  const total = groups.reduce((a, b) => a + b, 0);
  const partials = c.scratch(Math.max(1, total), `${label} partial sums`);
  const pw = (binding: number): BindingSpec => ({ binding, buffer: partials, access: 'w', what: 'partial sums' });
  const specs: DispatchSpec[] = [];
  let base = 0;
  op.inputs.forEach((id, i) => {
    if (id < 0 || groups[i] === 0) return;
    specs.push({
      kernel: 'grad_norm',
      entry: 'partial_main',
      label: `${label} ${c.name(id)}`,
      params: [u(c.numel(id)), u(base), u(0), u(0)],
      bindings: [r(1, id), pw(2)],
      workgroups: c.grid(groups[i]!),
    });
    base += groups[i]!;
  });
  specs.push({
    kernel: 'grad_norm',
    entry: 'finish_main',
    label: `${label} finish`,
    params: [u(0), u(0), u(total), u(0)],
    bindings: [pw(2), w(3, need(out(0), 'norm'))],
    workgroups: [1, 1, 1],
  });
  return specs;
}

// adamw: in place on param, m and v; the step scalars come from a constants buffer (one slot per set of attributes).
function planAdamw(c: PlanContext): DispatchSpec[] {
  const { op, label, inp, out, need, r, w, elementwise } = c;
  const p = need(inp(0), 'param'),
    g = need(inp(1), 'grad'),
    m = need(inp(2), 'm'),
    v = need(inp(3), 'v');
  const norm = need(inp(4), 'norm');
  need(inp(5), 'hparams');
  if (out(0) !== p || out(1) !== m || out(2) !== v)
    throw new WebGPUError(`${label}: adamw must update param, m and v in place`);
  const attrs = {
    beta1: op.attrs['beta1'] ?? 0.9,
    beta2: op.attrs['beta2'] ?? 0.95,
    eps: op.attrs['eps'] ?? 1e-8,
    weight_decay: op.attrs['weight_decay'] ?? 0,
    max_norm: op.attrs['max_norm'] ?? 1,
  };
  const n = c.numel(p);
  return [
    {
      kernel: 'adamw',
      entry: 'main',
      label,
      params: [u(n), u(c.adamwSlot(attrs)), u(0), u(0)],
      bindings: [
        { binding: 1, buffer: c.readDummy(), access: 'r', what: 'adamw constants' }, // replaced in prepare()
        r(2, norm),
        w(3, p),
        r(4, g),
        w(5, m),
        w(6, v),
      ],
      workgroups: elementwise(n),
    },
  ];
}

const PLANNERS: { readonly [K in OpKind]: Planner } = {
  embedding: planEmbedding,
  embedding_backward: planEmbeddingBackward,
  layernorm: planLayernorm,
  layernorm_backward: planLayernormBackward,
  linear: planLinear,
  linear_backward: planLinearBackward,
  attention: planAttention,
  attention_backward: planAttentionBackward,
  kv_cache_write: planKvCacheWrite,
  attention_cached: planAttentionCached,
  attention_probs: planAttentionProbs,
  slice_rows: planSliceRows,
  gelu: planGelu,
  gelu_backward: planGeluBackward,
  dropout: planDropout,
  dropout_backward: planDropoutBackward,
  add: planAdd,
  add_backward: planAddBackward,
  cross_entropy: planCrossEntropy,
  cross_entropy_backward: planCrossEntropyBackward,
  cross_entropy_tied: planCrossEntropyTied,
  cross_entropy_tied_backward: planCrossEntropyTiedBackward,
  grad_norm: planGradNorm,
  adamw: planAdamw,
};

// ---------------------------------------------------------------------------------------------

export class Executor {
  readonly backend: WebGPUBackend;
  readonly program: ProgramJSON;
  readonly tensors: (GPUTensor | null)[];
  private readonly owned: GPUBuffer[] = [];
  private specs: DispatchSpec[] = [];
  private prepared: PreparedDispatch[] = [];
  private paramsBuffer: GPUBuffer | null = null;
  private dummyRead: GPUBuffer | null = null;
  private readonly dummyWrite: GPUBuffer[] = [];
  // AdamW: distinct attribute sets -> slot in the constants buffer.
  private readonly adamwGroups = new Map<string, { slot: number; attrs: Record<string, number> }>();
  private adamwConsts: GPUBuffer | null = null;
  // Host-side range checks of i32 inputs (token ids, pos0): tensor id -> exclusive upper bound
  // and what it bounds (the tightest bound wins when several ops read the input).
  private readonly idBounds = new Map<number, { bound: number; why: (value: number, index: number) => string }>();
  private bound(id: number, bound: number, why: (value: number, index: number) => string): void {
    const b = this.idBounds.get(id);
    if (!b || bound < b.bound) this.idBounds.set(id, { bound, why });
  }
  runs = 0;
  readonly memory: MemoryPlan;

  // share = false: every tensor in a buffer of its own, so that after a run each holds what its
  // op wrote (tests that look inside a run); it costs every activation at once.
  constructor(backend: WebGPUBackend, program: ProgramJSON, share = true) {
    this.backend = backend;
    this.program = program;
    // Every tensor against the device's buffer limits before the first buffer is created: a
    // program that cannot run allocates nothing.
    const lim = backend.device.limits;
    const cap = Math.min(lim.maxStorageBufferBindingSize, lim.maxBufferSize);
    const over = program.tensors.filter((t) => numel(t.shape) * 4 > cap);
    if (over.length) {
      const big = over.reduce((a, b) => (numel(b.shape) > numel(a.shape) ? b : a));
      throw new WebGPUError(
        `program '${program.name}' does not fit this WebGPU device: tensor '${big.name}' needs ` +
          `${numel(big.shape) * 4} bytes, more than this device can bind (maxStorageBufferBindingSize ` +
          `${lim.maxStorageBufferBindingSize}, maxBufferSize ${lim.maxBufferSize})` +
          (over.length > 1
            ? `, and ${over.length - 1} more tensor${over.length > 2 ? 's are' : ' is'} too large`
            : '') +
          `; a smaller batch, context or model fits`,
      );
    }
    // Non-persistent tensors share buffers by liveness (memory.ts); persistent ones live in the
    // backend's store, shared by every program of the model.
    this.memory = planMemory(program, share);
    const slots = this.memory.slotBytes.map((size, s) => {
      const names = program.tensors.filter((_, i) => this.memory.slot[i] === s).map((t) => t.name);
      const buffer = backend.device.createBuffer({
        label: names.length > 1 ? `${names[0]} (+${names.length - 1} more)` : names[0],
        size,
        usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST,
      });
      this.owned.push(buffer);
      return buffer;
    });
    this.tensors = program.tensors.map((t, i) =>
      isPersistent(t)
        ? backend.persistent(t)
        : { info: t, buffer: slots[this.memory.slot[i]!]!, bytes: numel(t.shape) * 4 },
    );
  }

  // Bytes of this program's own buffers (the persistent tensors are the backend's).
  get bufferBytes(): number {
    return this.memory.bytes;
  }

  get dispatchCount(): number {
    return this.prepared.length;
  }

  id(name: string): number {
    const i = this.program.tensors.findIndex((t) => t.name === name);
    if (i < 0) throw new WebGPUError(`program '${this.program.name}' has no tensor '${name}'`);
    return i;
  }

  tensor(name: string): GPUTensor {
    return this.tensors[this.id(name)]!;
  }

  // ---- planning ------------------------------------------------------------------------------

  private shape(id: number): number[] {
    return this.program.tensors[id]!.shape;
  }
  private numel(id: number): number {
    return numel(this.shape(id));
  }
  private buf(id: number): GPUBuffer {
    return this.tensors[id]!.buffer;
  }
  // A binding covers its tensor, not the rest of a buffer shared with larger tensors.
  private bindBytes(id: number): number {
    return bufferBytes(this.shape(id));
  }
  private name(id: number): string {
    return this.program.tensors[id]!.name;
  }
  private readDummy(): GPUBuffer {
    this.dummyRead ??= this.backend.device.createBuffer({
      label: 'absent (read)',
      size: 16,
      usage: GPUBufferUsage.STORAGE,
    });
    return this.dummyRead;
  }
  private writeDummy(k: number): GPUBuffer {
    while (this.dummyWrite.length <= k)
      this.dummyWrite.push(
        this.backend.device.createBuffer({
          label: `absent (write ${this.dummyWrite.length})`,
          size: 16,
          usage: GPUBufferUsage.STORAGE,
        }),
      );
    return this.dummyWrite[k]!;
  }
  private scratch(floats: number, label: string): GPUBuffer {
    const b = this.backend.device.createBuffer({
      label,
      size: Math.max(16, Math.ceil((floats * 4) / 16) * 16),
      usage: GPUBufferUsage.STORAGE,
    });
    this.owned.push(b);
    return b;
  }

  // A 1-D range of `count` workgroups as a 2-D grid (each dimension is limited, 65535 by default);
  // kernels linearise it as wid.y * num_workgroups.x + wid.x and skip the overshoot.
  private grid(count: number): [number, number, number] {
    const max = this.backend.maxWorkgroups;
    const x = Math.max(1, Math.min(count, max));
    const y = ceilDiv(count, x);
    if (y > max) throw new WebGPUError(`dispatch of ${count} workgroups is too large for this device`);
    return [x, y, 1];
  }

  // One op's dispatches: its planner from the table, with this executor as context.
  private plan(op: OpInfo, k: number): DispatchSpec[] {
    const label = `op ${k} ${op.op}`;
    if (!Object.hasOwn(PLANNERS, op.op)) throw new WebGPUError(`${label}: unknown op '${String((op as OpInfo).op)}'`);
    let dummies = 0;
    const c: PlanContext = {
      op,
      label,
      backend: this.backend,
      inp: (i) => (i < op.inputs.length ? op.inputs[i]! : -1),
      out: (i) => (i < op.outputs.length ? op.outputs[i]! : -1),
      acc: (i) => (op.attrs[`acc${i}`] ?? 0) !== 0,
      need: (id, what) => {
        if (id < 0) throw new WebGPUError(`${label}: missing ${what}`);
        return id;
      },
      r: (binding, id) =>
        id >= 0
          ? { binding, buffer: this.buf(id), access: 'r', what: this.name(id), size: this.bindBytes(id) }
          : { binding, buffer: this.readDummy(), access: 'r', what: '(absent)' },
      w: (binding, id) =>
        id >= 0
          ? { binding, buffer: this.buf(id), access: 'w', what: this.name(id), size: this.bindBytes(id) }
          : { binding, buffer: this.writeDummy(dummies++), access: 'w', what: '(absent)' },
      shape: (id) => this.shape(id),
      numel: (id) => this.numel(id),
      name: (id) => this.name(id),
      bound: (id, bound, why) => this.bound(id, bound, why),
      grid: (count) => this.grid(count),
      elementwise: (n) => this.grid(ceilDiv(n, 256)),
      scratch: (floats, what) => this.scratch(floats, what),
      rows: (binding, id, access, first, count, width) => this.rows(label, binding, id, access, first, count, width),
      vocabChunk: (M, V) => this.vocabChunk(label, M, V),
      logitsChunk: (access, binding, floats) => this.logitsChunk(access, binding, floats),
      readDummy: () => this.readDummy(),
      rowReductions: () => this.rowReductions(),
      rowsPerWorkgroup: () => this.rowsPerWorkgroup(),
      headSize: (C, H) => this.headSize(label, C, H),
      matmul: (...args) => this.matmul(...args),
      adamwSlot: (attrs) => this.adamwSlot(attrs),
    };
    return PLANNERS[op.op](c);
  }

  // AdamW's slot in the constants buffer: ops with the same attributes share one.
  private adamwSlot(attrs: Record<string, number>): number {
    const key = JSON.stringify(attrs);
    let grp = this.adamwGroups.get(key);
    if (!grp) {
      grp = { slot: this.adamwGroups.size, attrs };
      this.adamwGroups.set(key, grp);
    }
    return grp.slot;
  }

  // The common file behind `// #include reduce` for the layernorm kernels (options.reductions).
  private rowReductions(): IncludeAliases {
    const opt = this.backend.options.reductions;
    const sg = opt === 'subgroup' || (opt === 'auto' && this.backend.device.features.has('subgroups'));
    return sg ? { reduce: 'reduce_subgroup' } : {};
  }

  // Attention rows per workgroup (one per thread), see options.attentionRows.
  private rowsPerWorkgroup(): number {
    const opt = this.backend.options.attentionRows;
    return opt === 'auto' ? 64 : opt;
  }

  private headSize(label: string, C: number, H: number): number {
    if (!(H > 0) || C % H !== 0) throw new WebGPUError(`${label}: width ${C} is not divisible by ${H} heads`);
    return C / H;
  }

  // The generated kernel's configuration for a product ('auto'), or null for the hand-written
  // kernels (the measurements behind each rule: docs/webgpu.md "Matrix products"):
  // 128 x 128 tiles, 8 x 8 per thread, 16-deep K steps in one buffer (two barriers per step; the
  // double-buffered loop is more code for no gain), TR (operands contiguous along P transposed
  // first, so that every product reads its operands the way dW = dy^T x does, the fastest layout).
  // No shape class picks the subgroup variant (SG): shuffles bring the A values one at a time
  // where a broadcast vec4 read brings four; it stays available by name (matmulTiled '.../sg1')
  // where the device has 'subgroups'.
  private autoTiled(d: { I: number; J: number; P: number; transA: boolean; transB: boolean }): TiledConfig | null {
    const lim = this.backend.device.limits;
    if (ceilDiv(d.I, 128) * ceilDiv(d.J, 128) >= WIDE_MIN_TILES && d.P >= 128) {
      const c: TiledConfig = { ...TILED_DEFAULT, BK: 16, DB: 0, TR: 1 };
      if (
        tiledSmem(c) <= lim.maxComputeWorkgroupStorageSize &&
        tiledThreads(c) <= lim.maxComputeInvocationsPerWorkgroup
      )
        return c;
    }
    return null;
  }

  private matmul(
    label: string,
    d: MatmulDims,
    a: BindingSpec,
    b: BindingSpec,
    bias: BindingSpec,
    c: BindingSpec,
    hasBias: boolean,
    accumulate: boolean,
  ): DispatchSpec[] {
    // Variant (options 'auto'; docs/webgpu.md "Matrix products" has the measurements):
    //  - at least WIDE_MIN_TILES output tiles of 128 x 128 (e.g. 4096^3): linear_tiled
    //    128x128/8x8/k16/db0 with TR (autoTiled), operands contiguous along P first transposed;
    //  - the forward of products with at least 2048 rows and 1 GFLOP (Huge's fc_in / fc_out):
    //    linear_nt (128 x 128 tiles, split-K where few);
    //  - everything else: linear.wgsl (64 x 64 tiles, split-K for long reductions).
    // With matmulTiled 'off' (or matmulTile 128): linear_wide / linear_nt (128 x 128 tiles, need
    // 16 / 24 KiB of workgroup memory) for products with at least WIDE_MIN_TILES of their tiles.
    const opts = this.backend.options;
    const dev = this.backend.device;
    // A few rows over a short reduction (a generation step's products): linear.wgsl's `rows`, one
    // thread per element of C, unless a config forces a tiled kernel.
    if (
      d.I <= ROWS_MAX_I &&
      d.P <= ROWS_MAX_P &&
      opts.matmulTiled === 'auto' &&
      opts.matmulTile === 'auto' &&
      opts.matmulSplit === 'auto'
    )
      return [
        {
          kernel: 'linear',
          entry: 'rows',
          label: `${label} rows`,
          defines: { TM: 4, TN: 4 },
          constants: linearConstants(d, hasBias, accumulate, false),
          params: [u(d.I), u(d.J), u(d.P), u(d.lda), u(d.ldb), u(d.ldc), u(d.P), u(1)],
          bindings: [a, b, bias, c],
          workgroups: this.grid(ceilDiv(d.I * d.J, 256)),
        },
      ];
    // The generated kernel (linear_tiled, src/linear_gen.ts): forced by a config string, or
    // chosen per shape by autoTiled(); otherwise the hand-written kernels below.
    let tiled: TiledConfig | null = null;
    if (opts.matmulTiled !== 'auto' && opts.matmulTiled !== 'off') {
      tiled = parseTiled(opts.matmulTiled);
      if (tiled.SG && !dev.features.has('subgroups'))
        throw new WebGPUError(`${label}: matmul config ${opts.matmulTiled} needs the 'subgroups' feature`);
      if (
        tiledSmem(tiled) > dev.limits.maxComputeWorkgroupStorageSize ||
        tiledThreads(tiled) > dev.limits.maxComputeInvocationsPerWorkgroup
      )
        throw new WebGPUError(`${label}: matmul config ${opts.matmulTiled} exceeds this device's workgroup limits`);
    } else if (
      opts.matmulTiled === 'auto' &&
      opts.matmulTile === 'auto' &&
      opts.matmulNT === 'auto' &&
      opts.matmulBK === 'auto'
    )
      tiled = this.autoTiled(d);
    const bk = opts.matmulBK === 'auto' ? 8 : opts.matmulBK;
    const nt = !d.transA && d.transB && opts.matmulNT !== false;
    const wideBytes = nt ? 2 * 2 * 128 * 12 * 4 : 2 * 2 * bk * 128 * 4;
    const wideFits = dev.limits.maxComputeWorkgroupStorageSize >= wideBytes;
    const tiles128 = ceilDiv(d.I, 128) * ceilDiv(d.J, 128);
    const autoNT = nt && opts.matmulNT === 'auto' && d.I >= 2048 && 2 * d.I * d.J * d.P >= 1e9 && d.P >= 128;
    const wide =
      !tiled &&
      wideFits &&
      (opts.matmulTile === 128 ||
        (opts.matmulTile === 'auto' && ((tiles128 >= WIDE_MIN_TILES && d.P >= 128) || autoNT)));
    const tileM = tiled ? tiled.BM : wide ? 128 : 64;
    const tileN = tiled ? tiled.BN : wide ? 128 : 64;
    const gx = ceilDiv(d.J, tileN),
      gy = ceilDiv(d.I, tileM);
    if (gx > this.backend.maxWorkgroups || gy > this.backend.maxWorkgroups)
      throw new WebGPUError(`${label}: a [${d.I}, ${d.J}] product needs more workgroups than this device dispatches`);
    // Split-K: how many chunks of P (each a multiple of the K step, at least 16).
    const opt = opts.matmulSplit;
    const big = tiled ? tileM * tileN >= 128 * 128 : wide;
    const kstep = tiled ? Math.max(16, tiled.BK) : 16;
    let splits = 1;
    if (opt === 'auto') {
      const target = big ? 264 : 528; // about 2 (large tiles) or 4 workgroups per multiprocessor
      if (gx * gy < target / 2 && d.P >= 512) splits = Math.min(Math.floor(d.P / 256), Math.ceil(target / (gx * gy)));
    } else splits = Math.max(1, Math.min(opt, ceilDiv(d.P, kstep)));
    let pchunk = d.P;
    if (splits > 1) {
      pchunk = ceilDiv(ceilDiv(d.P, splits), kstep) * kstep;
      splits = ceilDiv(d.P, pchunk);
    }
    const constants: Record<string, number> = linearConstants(d, hasBias, accumulate, splits > 1);
    // TR: copy operands that are contiguous along P transposed into scratch buffers first.
    const pre: DispatchSpec[] = [];
    if (tiled?.TR) {
      const lim = Math.min(dev.limits.maxStorageBufferBindingSize, dev.limits.maxBufferSize);
      const transpose = (which: 0 | 1, rows: number, ld: number, src: BindingSpec): BindingSpec | null => {
        const ldo = ceilDiv(rows, 4) * 4;
        if (
          d.P * ldo * 4 > lim ||
          ceilDiv(d.P, 32) > this.backend.maxWorkgroups ||
          ceilDiv(rows, 32) > this.backend.maxWorkgroups
        )
          return null;
        this.trFloats[which] = Math.max(this.trFloats[which], d.P * ldo);
        const what = `transposed operand ${which ? 'B' : 'A'}`;
        pre.push({
          kernel: 'transpose',
          entry: 'main',
          label: `${label} ${which ? 'B' : 'A'}^T`,
          params: [u(rows), u(d.P), u(ld), u(ldo)],
          bindings: [
            { ...src, binding: 1 },
            { binding: 2, buffer: this.trPlaceholder(which), access: 'w', what },
          ],
          workgroups: [ceilDiv(d.P, 32), ceilDiv(rows, 32), 1],
        });
        return { binding: which + 1, buffer: this.trPlaceholder(which), access: 'r', what };
      };
      if (!d.transA) {
        const t = transpose(0, d.I, d.lda, a);
        if (t) {
          a = t;
          constants.TRANS_A = 1;
          constants.ALIGNED_A = 1;
        }
      }
      if (d.transB) {
        const t = transpose(1, d.J, d.ldb, b);
        if (t) {
          b = t;
          constants.TRANS_B = 0;
          constants.ALIGNED_B = 1;
        }
      }
    }
    const lda = pre.some((s) => s.label.endsWith('A^T')) ? ceilDiv(d.I, 4) * 4 : d.lda;
    const ldb = pre.some((s) => s.label.endsWith('B^T')) ? ceilDiv(d.J, 4) * 4 : d.ldb;
    const params = [u(d.I), u(d.J), u(d.P), u(lda), u(ldb), u(d.ldc), u(pchunk), u(splits)];
    const kernel = tiled ? 'linear_tiled' : wide ? (nt ? 'linear_nt' : 'linear_wide') : 'linear';
    const defines: Record<string, number> = tiled
      ? { ...tiled, TR: 0 }
      : wide
        ? nt
          ? {}
          : { BK: bk }
        : { TM: 4, TN: 4 };
    if (splits === 1)
      return [
        ...pre,
        {
          kernel,
          entry: 'main',
          label,
          defines,
          constants,
          params,
          bindings: [a, b, bias, c],
          workgroups: [gx, gy, 1],
        },
      ];
    this.splitFloats = Math.max(this.splitFloats, splits * d.I * d.J);
    const scratchW: BindingSpec = {
      binding: 4,
      buffer: this.splitPlaceholder(),
      access: 'w',
      what: 'split-K partial products',
    };
    const scratchR: BindingSpec = {
      binding: 5,
      buffer: this.splitPlaceholder(),
      access: 'r',
      what: 'split-K partial products',
    };
    return [
      ...pre,
      {
        kernel,
        entry: 'main',
        label: `${label} split ${splits}`,
        defines,
        constants,
        params,
        bindings: [a, b, bias, scratchW],
        workgroups: [gx, gy, splits],
      },
      {
        kernel: 'linear',
        entry: 'reduce_split',
        label: `${label} reduce`,
        defines: { TM: 4, TN: 4 },
        constants,
        params,
        bindings: [bias, c, scratchR],
        workgroups: this.grid(ceilDiv(d.I * d.J, 256)),
      },
    ];
  }

  // Likewise one scratch buffer per transposed operand (A, B) for every product with TR.
  private trFloats: [number, number] = [0, 0];
  private trDummy: [GPUBuffer | null, GPUBuffer | null] = [null, null];
  private trPlaceholder(which: 0 | 1): GPUBuffer {
    this.trDummy[which] ??= this.backend.device.createBuffer({
      label: 'transpose placeholder',
      size: 16,
      usage: GPUBufferUsage.STORAGE,
    });
    return this.trDummy[which]!;
  }

  // A slice of a tensor's rows as a binding (cross_entropy_tied's chunks of W and dW). The size is
  // rounded up to 16 bytes (the matrix products read vec4s) within the buffer, itself rounded so.
  private rows(
    label: string,
    binding: number,
    id: number,
    access: Access,
    first: number,
    count: number,
    width: number,
  ): BindingSpec {
    const t = this.tensors[id]!;
    const offset = first * width * 4;
    const align = this.backend.device.limits.minStorageBufferOffsetAlignment;
    if (offset % align !== 0)
      throw new WebGPUError(`${label}: row ${first} of '${t.info.name}' is not ${align}-byte aligned`);
    const size = Math.min(Math.ceil((count * width * 4) / 16) * 16, bufferBytes(t.info.shape) - offset);
    return {
      binding,
      buffer: t.buffer,
      access,
      what: `${t.info.name} rows ${first}..${first + count - 1}`,
      offset,
      size,
    };
  }

  // Vocabulary rows per chunk of cross_entropy_tied: a multiple of 64 (so that every chunk of W
  // starts 256-byte aligned, whatever C), or all of V (see options.vocabChunk).
  private vocabChunk(label: string, M: number, V: number): number {
    const lim = this.backend.device.limits;
    const maxFloats = Math.floor(Math.min(lim.maxStorageBufferBindingSize, lim.maxBufferSize) / 4);
    const opt = this.backend.options.vocabChunk;
    const n =
      opt === 'auto'
        ? Math.max(64, Math.floor(Math.min(VOCAB_CHUNK_FLOATS, maxFloats) / Math.max(M, 1) / 64) * 64)
        : Math.max(64, Math.ceil(opt / 64) * 64);
    const chunk = Math.min(V, n);
    if (M * chunk > maxFloats)
      throw new WebGPUError(`${label}: ${M} rows of ${chunk} logits are more than this device can bind`);
    return chunk;
  }

  // The logits of one vocabulary chunk: one scratch buffer for every cross_entropy_tied op of the
  // program (they run one after another), sized in prepare() for the largest.
  private chunkFloats = 0;
  private chunkDummy: GPUBuffer | null = null;
  private logitsChunk(access: Access, binding: number, floats: number): BindingSpec {
    this.chunkFloats = Math.max(this.chunkFloats, floats);
    this.chunkDummy ??= this.backend.device.createBuffer({
      label: 'logits chunk placeholder',
      size: 16,
      usage: GPUBufferUsage.STORAGE,
    });
    return { binding, buffer: this.chunkDummy, access, what: 'logits chunk' };
  }

  // One scratch buffer serves every split-K product of the program (they run one after another).
  private splitFloats = 0;
  private splitDummy: GPUBuffer | null = null;
  private splitPlaceholder(): GPUBuffer {
    this.splitDummy ??= this.backend.device.createBuffer({
      label: 'split-K placeholder',
      size: 16,
      usage: GPUBufferUsage.STORAGE,
    });
    return this.splitDummy;
  }

  // Plans every op, creates (or reuses) the pipelines, the uniform buffer and the bind groups.
  async prepare(): Promise<void> {
    const device = this.backend.device;
    this.specs = this.program.ops.flatMap((op, k) => this.plan(op, k));
    if (this.adamwGroups.size > 0) {
      this.adamwConsts = device.createBuffer({
        label: 'adamw constants',
        size: 32 * this.adamwGroups.size,
        usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST,
      });
      this.owned.push(this.adamwConsts);
      for (const s of this.specs)
        if (s.kernel === 'adamw')
          s.bindings[0] = { binding: 1, buffer: this.adamwConsts, access: 'r', what: 'adamw constants' };
    }
    if (this.chunkDummy) {
      const scratch = this.scratch(this.chunkFloats, 'logits chunk');
      for (const s of this.specs) for (const b of s.bindings) if (b.buffer === this.chunkDummy) b.buffer = scratch;
      this.chunkDummy.destroy();
      this.chunkDummy = null;
    }
    if (this.splitDummy) {
      const scratch = this.scratch(this.splitFloats, 'split-K partial products');
      for (const s of this.specs) for (const b of s.bindings) if (b.buffer === this.splitDummy) b.buffer = scratch;
      this.splitDummy.destroy();
      this.splitDummy = null;
    }
    for (const which of [0, 1] as const) {
      const dummy = this.trDummy[which];
      if (!dummy) continue;
      const scratch = this.scratch(this.trFloats[which], `transposed operand ${which ? 'B' : 'A'}`);
      for (const s of this.specs) for (const b of s.bindings) if (b.buffer === dummy) b.buffer = scratch;
      dummy.destroy();
      this.trDummy[which] = null;
    }
    // WebGPU forbids a buffer bound writable together with any other binding in one dispatch.
    for (const s of this.specs) {
      s.bindings.forEach((b, i) => {
        s.bindings.forEach((o, j) => {
          if (i !== j && b.buffer === o.buffer && (b.access === 'w' || o.access === 'w') && b.what !== '(absent)')
            throw new WebGPUError(`${s.label}: tensor '${b.what}' is both written and bound again in one dispatch`);
        });
      });
    }
    const align = device.limits.minUniformBufferOffsetAlignment;
    const slot = Math.max(align, 64);
    const data = new ArrayBuffer(Math.max(slot, slot * this.specs.length));
    const dv = new DataView(data);
    this.specs.forEach((s, k) => {
      if (s.params.length * 4 > 64) throw new Error(`${s.label}: too many parameters`);
      s.params.forEach((p, i) => {
        const o = k * slot + i * 4;
        if ('u' in p) dv.setUint32(o, p.u, true);
        else if ('i' in p) dv.setInt32(o, p.i, true);
        else dv.setFloat32(o, p.f, true);
      });
    });
    this.paramsBuffer = device.createBuffer({
      label: `${this.program.name} params`,
      size: data.byteLength,
      usage: GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST,
    });
    this.owned.push(this.paramsBuffer);
    device.queue.writeBuffer(this.paramsBuffer, 0, data);

    device.pushErrorScope('validation');
    const settled = await Promise.allSettled(this.specs.map((s) => this.backend.pipeline(s)));
    const scopeErr = await device.popErrorScope();
    const rejected = settled.find((x): x is PromiseRejectedResult => x.status === 'rejected');
    if (rejected) throw rejected.reason;
    if (scopeErr) throw new WebGPUError(`loading program '${this.program.name}': ${scopeErr.message}`);
    const pipelines = settled.map((x) => (x as PromiseFulfilledResult<GPUComputePipeline>).value);
    device.pushErrorScope('validation');
    this.prepared = this.specs.map((s, k) => ({
      pipeline: pipelines[k]!,
      bindGroup: device.createBindGroup({
        label: s.label,
        layout: this.backend.layout(s.bindings),
        entries: [
          { binding: 0, resource: { buffer: this.paramsBuffer!, offset: k * slot, size: 64 } },
          ...s.bindings.map((b) => ({
            binding: b.binding,
            resource: { buffer: b.buffer, offset: b.offset ?? 0, size: b.size },
          })),
        ],
      }),
      workgroups: s.workgroups,
      label: s.label,
    }));
    const err = await device.popErrorScope();
    if (err) throw new WebGPUError(`loading program '${this.program.name}': ${err.message}`);
    this.backend.check();
  }

  // ---- running -------------------------------------------------------------------------------

  // Uploads an input tensor (writeBuffer; takes effect in the next submitted run).
  setInput(name: string, values: ArrayLike<number> | Float32Array | Int32Array): void {
    this.backend.check();
    const id = this.id(name);
    const t = this.tensors[id]!;
    const n = numel(t.info.shape);
    if (values.length !== n) throw new WebGPUError(`input '${name}' needs ${n} values, got ${values.length}`);
    let data: Float32Array | Int32Array;
    if (t.info.dtype === 'i32') {
      data = values instanceof Int32Array ? values : Int32Array.from(values as ArrayLike<number>);
      const b = this.idBounds.get(id);
      if (b !== undefined)
        for (let i = 0; i < data.length; i++)
          if (!(data[i]! >= 0 && data[i]! < b.bound)) throw new WebGPUError(`input '${name}': ${b.why(data[i]!, i)}`);
    } else {
      data = values instanceof Float32Array ? values : Float32Array.from(values as ArrayLike<number>);
    }
    this.backend.device.queue.writeBuffer(t.buffer, 0, data.buffer, data.byteOffset, data.byteLength);
    if (name === 'optim.hparams') this.updateAdamw(data[0]!, data[1]!);
  }

  // optim.hparams = [lr, step] (step = the 1-based optimizer step being taken).
  setHparams(lr: number, step: number): void {
    this.setInput('optim.hparams', Float32Array.of(lr, step));
  }

  // Whether the program reads an input (e.g. 'dropout.seed' of a train program with dropout).
  has(name: string): boolean {
    return this.program.tensors.some((t) => t.name === name);
  }

  // dropout.seed = {key, step} (docs/model.md "Dropout"): key from the run's seed (dropoutKey),
  // step the 1-based optimizer step being taken; both read as u32 by the kernels.
  setDropoutSeed(key: number, step: number): void {
    this.setInput('dropout.seed', Int32Array.of(key | 0, step | 0));
  }

  private updateAdamw(lr: number, step: number): void {
    if (!this.adamwConsts) return;
    const c = new Float32Array(8 * this.adamwGroups.size);
    for (const { slot, attrs } of this.adamwGroups.values()) c.set(adamwConstants(lr, step, attrs), slot * 8);
    this.backend.device.queue.writeBuffer(this.adamwConsts, 0, c);
  }

  // Records every dispatch of the program into one compute pass.
  encode(encoder: GPUCommandEncoder): void {
    const pass = encoder.beginComputePass({ label: this.program.name });
    for (const d of this.prepared) {
      pass.setPipeline(d.pipeline);
      pass.setBindGroup(0, d.bindGroup);
      pass.dispatchWorkgroups(d.workgroups[0], d.workgroups[1], d.workgroups[2]);
    }
    pass.end();
  }

  // One run: one command encoder, one submit. With `readback`, the named tensors are copied to a
  // staging buffer in the same submission and the returned promise resolves once they are mapped;
  // nothing here waits for the GPU.
  run(readback: string[] = []): Promise<Map<string, Float32Array | Int32Array>> | null {
    this.backend.check();
    const device = this.backend.device;
    const encoder = device.createCommandEncoder({ label: `${this.program.name} run ${this.runs}` });
    this.encode(encoder);
    const finish =
      readback.length > 0
        ? this.backend.encodeReadback(
            encoder,
            readback.map((n) => this.tensor(n)),
          )
        : null;
    this.backend.submitChecked([encoder.finish()], `program '${this.program.name}' run ${this.runs}`);
    this.runs++;
    return finish ? finish() : null;
  }

  // Profiling (slow: one submit and one wait per dispatch): wall seconds per dispatch label,
  // with the op number stripped so that labels of the same kind add up.
  async profile(): Promise<Map<string, number>> {
    this.backend.check();
    const device = this.backend.device;
    const times = new Map<string, number>();
    for (const d of this.prepared) {
      const encoder = device.createCommandEncoder();
      const pass = encoder.beginComputePass();
      pass.setPipeline(d.pipeline);
      pass.setBindGroup(0, d.bindGroup);
      pass.dispatchWorkgroups(d.workgroups[0], d.workgroups[1], d.workgroups[2]);
      pass.end();
      const t0 = performance.now();
      device.queue.submit([encoder.finish()]);
      await device.queue.onSubmittedWorkDone();
      const key = d.label.replace(/^op \d+ /, '').replace(/ (grad\.)?(blocks|tok_emb|pos_emb|ln_f)\S*$/, '');
      times.set(key, (times.get(key) ?? 0) + (performance.now() - t0) / 1000);
    }
    this.backend.check();
    return times;
  }

  // Reads any tensor of this program now (waits for the GPU).
  async read(name: string): Promise<Float32Array | Int32Array> {
    return (await this.backend.read([this.tensor(name)])).get(name)!;
  }

  // Overwrites any tensor of this program (tests: initial values of accumulated outputs).
  write(name: string, values: Float32Array | Int32Array): void {
    const t = this.tensor(name);
    if (values.length * 4 !== t.bytes)
      throw new WebGPUError(`tensor '${name}' needs ${t.bytes / 4} values, got ${values.length}`);
    this.backend.device.queue.writeBuffer(t.buffer, 0, values.buffer, values.byteOffset, values.byteLength);
  }

  destroy(): void {
    for (const b of this.owned) b.destroy();
    this.dummyRead?.destroy();
    for (const b of this.dummyWrite) b.destroy();
  }
}
