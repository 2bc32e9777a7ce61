// Text generation on WebGPU: the engine's `generate` program (one token per run with a KV cache,
// `ptl program --program generate`), optionally the same program over a block of K tokens for
// prompts (`--seq K`: a product per weight for K tokens instead of K of them), plus, past the
// context, a `forward` program over the last ctx tokens; sampling on the host. The same scheme
// as Trainer::next_token in engine/trainer.cpp, so greedy generation gives ptl sample's bytes
// (test/generate.test.mjs), and the sampler is a port of engine/sampler.cpp with the engine's
// random stream (engine/rng.h), so a seeded sampled run draws what `ptl sample --seed` draws
// wherever the two backends' logits lead to the same choice.
import { type Executor, type WebGPUBackend, WebGPUError } from './executor.js';
import type { ProgramJSON } from './program.js';

// ---- the engine's random stream and sampler ------------------------------------------------

const M64 = (1n << 64n) - 1n;

// splitmix64 (engine/rng.h): one 64-bit word of state.
export class Rng {
  state: bigint;
  constructor(seed: bigint) {
    this.state = seed & M64;
  }
  nextU64(): bigint {
    this.state = (this.state + 0x9e3779b97f4a7c15n) & M64;
    let z = this.state;
    z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & M64;
    z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & M64;
    return z ^ (z >> 31n);
  }
  // Uniform in [0, 1) with 53 random bits.
  uniform(): number {
    return Number(this.nextU64() >> 11n) * 2 ** -53;
  }
}

// rng_for(seed, name): FNV-1a of the name mixed with the seed through one splitmix step.
export function rngFor(seed: number | bigint, name: string): Rng {
  let h = 0xcbf29ce484222325n;
  for (const c of new TextEncoder().encode(name)) h = ((h ^ BigInt(c)) * 0x100000001b3n) & M64;
  const mix = new Rng(BigInt(seed) ^ h);
  return new Rng(mix.nextU64());
}

export interface SamplingOptions {
  temperature?: number; // 0 = greedy (argmax); default 0.8 as ptl sample
  topK?: number; // 0 = off
  topP?: number; // 1 = off
  seed?: number; // default 1337 as ptl sample
}

// engine/sampler.cpp: greedy, or temperature, then top-k, then top-p, then a seeded draw.
export class Sampler {
  readonly temperature: number;
  readonly topK: number;
  readonly topP: number;
  private readonly rng: Rng;

  constructor(opt: SamplingOptions = {}) {
    this.temperature = opt.temperature ?? 0.8;
    this.topK = opt.topK ?? 0;
    this.topP = opt.topP ?? 1;
    if (!(Number.isFinite(this.temperature) && this.temperature >= 0))
      throw new Error('temperature must be 0 or positive');
    if (!(Number.isInteger(this.topK) && this.topK >= 0))
      throw new Error('top-k must be 0 (off) or a positive integer');
    if (!(this.topP > 0 && this.topP <= 1)) throw new Error('top-p must be in (0, 1]');
    this.rng = rngFor(opt.seed ?? 1337, 'sampler');
  }

  static argmax(logits: ArrayLike<number>): number {
    let best = 0;
    for (let i = 1; i < logits.length; i++) if (logits[i]! > logits[best]!) best = i; // first of equal maxima
    return best;
  }

  // The distribution sample() draws from (after temperature, top-k and top-p).
  distribution(logits: ArrayLike<number>): Float64Array {
    const V = logits.length;
    const p = new Float64Array(V);
    if (this.temperature === 0) {
      p[Sampler.argmax(logits)] = 1;
      return p;
    }
    // Candidates by decreasing logit, ties: lower byte first (Array.prototype.sort is stable).
    const order = Array.from({ length: V }, (_, i) => i).sort((a, b) =>
      logits[b]! > logits[a]! ? 1 : logits[b]! < logits[a]! ? -1 : 0,
    );
    const k = this.topK > 0 ? Math.min(this.topK, V) : V;
    const mx = logits[order[0]!]! / this.temperature;
    let sum = 0;
    for (let i = 0; i < k; i++) sum += p[order[i]!] = Math.exp(logits[order[i]!]! / this.temperature - mx);
    for (let i = 0; i < k; i++) p[order[i]!]! /= sum;
    if (this.topP < 1) {
      let cum = 0,
        keep = 0;
      while (keep < k) {
        cum += p[order[keep++]!]!;
        if (cum >= this.topP) break;
      }
      for (let i = keep; i < k; i++) p[order[i]!] = 0;
      for (let i = 0; i < keep; i++) p[order[i]!]! /= cum;
    }
    return p;
  }

  sample(logits: ArrayLike<number>): number {
    if (this.temperature === 0) return Sampler.argmax(logits);
    const p = this.distribution(logits);
    const u = this.rng.uniform();
    let cum = 0,
      last = 0;
    for (let i = 0; i < p.length; i++) {
      if (p[i]! <= 0) continue;
      last = i;
      cum += p[i]!;
      if (u < cum) return i;
    }
    return last; // u landed in the rounding gap at the top
  }
}

// ---- the generator -------------------------------------------------------------------------

export interface GenerateOptions extends SamplingOptions {
  maxTokens?: number; // default 200 as ptl sample
}

// The KV caches are state tensors in the backend's store (named by layer, like the engine's), so
// two generators of one model on one backend share them: use one at a time per backend.
export class WebGPUGenerator {
  readonly backend: WebGPUBackend;
  readonly vocab: number;
  readonly ctx: number;
  private readonly step: Executor;
  private readonly window: Executor | null;
  private readonly block: Executor | null; // the prompt's program: K tokens per run
  private readonly blockRows: number;
  private seq: number[] = [];
  private cached = 0; // tokens already in the KV cache (positions 0 .. cached - 1)
  private last: Executor; // the program whose logits are those after the cached tokens

  private constructor(backend: WebGPUBackend, step: Executor, window: Executor | null, block: Executor | null) {
    this.backend = backend;
    this.step = step;
    this.window = window;
    this.block = block;
    this.blockRows = block ? block.tensor('tokens').info.shape[1]! : 1;
    this.last = step;
    const logits = step.tensor('logits').info.shape;
    this.vocab = logits.at(-1)!;
    const kc = step.program.tensors.find((t) => t.kind === 'state');
    if (!kc)
      throw new WebGPUError(
        `program '${step.program.name}' has no KV cache (state tensors): is it a generate program?`,
      );
    this.ctx = kc.shape[0]!;
  }

  // generate: `ptl program [CKPT] --program generate`; window (optional): `ptl program [CKPT]
  // --program forward --batch 1`, needed only to go past the context (ctx tokens); prefill
  // (optional): `ptl program [CKPT] --program generate --seq K` (the engine's "prefill"
  // program), which takes a prompt K tokens at a time (the rest, fewer than K, one at a time).
  // The weights must be in the backend's store already (backend.loadWeights).
  static async create(
    backend: WebGPUBackend,
    generate: string | ProgramJSON,
    window?: string | ProgramJSON,
    prefill?: string | ProgramJSON,
  ): Promise<WebGPUGenerator> {
    const step = await backend.load(generate);
    let win: Executor | null = null;
    let block: Executor | null = null;
    // tokens [1, rows] and pos0: a generate program over `rows` tokens.
    const isGenerate = (e: Executor, rows?: number) => {
      const t = e.program.tensors;
      const tok = t.find((x) => x.name === 'tokens'),
        pos = t.find((x) => x.name === 'pos0');
      return (
        !!tok && !!pos && tok.shape.length === 2 && tok.shape[0] === 1 && (rows === undefined || tok.shape[1] === rows)
      );
    };
    try {
      if (!isGenerate(step, 1))
        throw new WebGPUError(
          `program '${step.program.name}' is not a generate program (needs tokens [1, 1] and pos0)`,
        );
      if (prefill) {
        block = await backend.load(prefill);
        const states = (e: Executor) =>
          JSON.stringify(e.program.tensors.filter((x) => x.kind === 'state').map((x) => [x.name, x.shape]));
        if (
          !isGenerate(block) ||
          block.tensor('logits').info.shape.at(-1) !== step.tensor('logits').info.shape.at(-1) ||
          states(block) !== states(step)
        )
          throw new WebGPUError(
            `prefill program '${block.program.name}' must be a generate program of the same model (ptl program --program generate --seq K)`,
          );
      }
      if (window) {
        win = await backend.load(window);
        const wt = win.tensor('tokens').info.shape;
        if (wt[0] !== 1 || win.tensor('logits').info.shape.at(-1) !== step.tensor('logits').info.shape.at(-1))
          throw new WebGPUError(
            `window program '${win.program.name}' must be a batch-1 forward program of the same model`,
          );
      }
      const g = new WebGPUGenerator(backend, step, win, block);
      if (win && win.tensor('tokens').info.shape[1] !== g.ctx)
        throw new WebGPUError(
          `window program has ${win.tensor('tokens').info.shape[1]} positions, the model's context is ${g.ctx}`,
        );
      return g;
    } catch (e) {
      step.destroy();
      win?.destroy();
      block?.destroy();
      throw e;
    }
  }

  get tokens(): readonly number[] {
    return this.seq;
  }

  // Starts a new sequence with `tokens` (an empty prompt starts from a newline, as ptl does) and
  // returns the logits [vocab] for the token after them.
  async prefill(tokens: ArrayLike<number>): Promise<Float32Array> {
    const t = Array.from(tokens);
    for (const x of t)
      if (!(Number.isInteger(x) && x >= 0 && x < this.vocab))
        throw new WebGPUError(`prompt token ${x} is outside the vocabulary [0, ${this.vocab})`);
    this.seq = t.length > 0 ? t : [10];
    this.cached = 0;
    return this.logits();
  }

  // Appends one token and returns the logits for the next one.
  async next(token: number): Promise<Float32Array> {
    if (!(Number.isInteger(token) && token >= 0 && token < this.vocab))
      throw new WebGPUError(`token ${token} is outside the vocabulary [0, ${this.vocab})`);
    if (this.seq.length === 0) throw new WebGPUError('no sequence: call prefill first');
    this.seq.push(token);
    return this.logits();
  }

  // Logits for the token after the current sequence. Within the context the KV cache is exact:
  // the tokens it has not seen go in K at a time through the prefill program while K remain,
  // then one per generate run (all submitted back to back, read back once). Past the context
  // the model sees the last ctx tokens at positions 0 .. ctx - 1 (nanoGPT's crop), so the
  // window is recomputed with the forward program.
  private async logits(): Promise<Float32Array> {
    const L = this.seq.length;
    if (L <= this.ctx) {
      let pending: Promise<Map<string, Float32Array | Int32Array>> | null = null;
      while (this.cached < L) {
        const k = this.block && L - this.cached >= this.blockRows ? this.blockRows : 1;
        const e = k > 1 ? this.block! : this.step;
        e.setInput('tokens', this.seq.slice(this.cached, this.cached + k));
        e.setInput('pos0', [this.cached]);
        this.cached += k;
        pending = e.run(this.cached === L ? ['logits'] : []);
        this.last = e;
      }
      const out = pending ? await pending : await this.backend.read([this.last.tensor('logits')]);
      return out.get('logits') as Float32Array;
    }
    if (!this.window)
      throw new WebGPUError(
        `the sequence (${L} tokens) is longer than the context (${this.ctx}): ` +
          'create the generator with a window program (ptl program --program forward --batch 1)',
      );
    this.window.setInput('tokens', this.seq.slice(L - this.ctx));
    const all = (await this.window.run(['logits'])!).get('logits') as Float32Array;
    return all.slice((this.ctx - 1) * this.vocab, this.ctx * this.vocab);
  }

  // Generates up to maxTokens tokens after the prompt (bytes or a string, UTF-8 encoded);
  // onToken may return false to stop. Returns the generated tokens.
  async generate(
    prompt: string | ArrayLike<number>,
    opts: GenerateOptions = {},
    onToken?: (token: number) => boolean | void,
  ): Promise<number[]> {
    const maxTokens = opts.maxTokens ?? 200;
    if (!(Number.isInteger(maxTokens) && maxTokens >= 0))
      throw new WebGPUError('maxTokens must be a non-negative integer');
    const sampler = new Sampler(opts);
    const bytes = typeof prompt === 'string' ? new TextEncoder().encode(prompt) : prompt;
    const out: number[] = [];
    if (maxTokens === 0) return out;
    let logits = await this.prefill(bytes);
    for (;;) {
      const t = sampler.sample(logits);
      out.push(t);
      if ((onToken && onToken(t) === false) || out.length >= maxTokens) break;
      logits = await this.next(t);
    }
    return out;
  }

  destroy(): void {
    this.step.destroy();
    this.window?.destroy();
    this.block?.destroy();
  }
}
