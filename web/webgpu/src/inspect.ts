// "Watch the model think": the engine's inspect program (a forward pass over one sequence that
// also outputs every layer's attention weights through the attention_probs op) on WebGPU.
// (`ptl program [CKPT] --program inspect [--seq T]`). Tensors: input `tokens` [1, T]; outputs
// `logits` [T, V] and, per layer i, `blocks.{i}.attn.probs` [1, H, T, T] (any tensor whose name
// ends in `probs` counts, ordered by the first number in its name). A prompt shorter than T is padded at
// the end: attention is causal, so positions before the padding are unaffected, and the result
// is cut to the prompt's length.
import { type Executor, type WebGPUBackend, WebGPUError } from './executor.js';
import type { ProgramJSON } from './program.js';

export interface Inspection {
  tokens: number[];
  vocab: number;
  heads: number;
  logits: Float32Array; // [L, V] for the L prompt tokens
  probs: Float32Array[]; // per layer: [H, L, L] (row i: query position i over keys 0..L-1)
}

export class WebGPUInspector {
  readonly exec: Executor;
  readonly seq: number;
  readonly vocab: number;
  readonly heads: number;
  readonly probNames: string[]; // per layer, in layer order

  private constructor(exec: Executor) {
    this.exec = exec;
    const tokens = exec.tensor('tokens').info.shape;
    if (tokens.length !== 2 || tokens[0] !== 1)
      throw new WebGPUError(`inspect program needs tokens [1, T], has [${tokens}]`);
    this.seq = tokens[1]!;
    this.vocab = exec.tensor('logits').info.shape.at(-1)!;
    const layer = (n: string) => Number(/(\d+)/.exec(n)?.[1] ?? 0);
    this.probNames = exec.program.tensors
      .filter((t) => /probs$/.test(t.name))
      .map((t) => t.name)
      .sort((a, b) => layer(a) - layer(b));
    if (this.probNames.length === 0)
      throw new WebGPUError(`program '${exec.program.name}' has no attention probabilities (…probs tensors)`);
    this.heads = exec.tensor(this.probNames[0]!).info.shape.at(-3)!;
  }

  // program: the engine's inspect program (batch 1); the weights must be in the backend's store.
  static async create(backend: WebGPUBackend, program: string | ProgramJSON): Promise<WebGPUInspector> {
    const exec = await backend.load(program);
    try {
      return new WebGPUInspector(exec);
    } catch (e) {
      exec.destroy();
      throw e;
    }
  }

  async inspect(tokens: ArrayLike<number>): Promise<Inspection> {
    const L = tokens.length,
      T = this.seq,
      V = this.vocab,
      H = this.heads;
    if (L < 1 || L > T) throw new WebGPUError(`inspect needs 1 to ${T} tokens, got ${L}`);
    const padded = new Int32Array(T);
    for (let i = 0; i < T; i++) padded[i] = tokens[Math.min(i, L - 1)]!;
    this.exec.setInput('tokens', padded);
    const out = await this.exec.run(['logits', ...this.probNames])!;
    const logits = (out.get('logits') as Float32Array).slice(0, L * V);
    const probs = this.probNames.map((n) => {
      const full = out.get(n) as Float32Array; // [1, H, T, T]
      const p = new Float32Array(H * L * L);
      for (let h = 0; h < H; h++)
        for (let i = 0; i < L; i++) p.set(full.subarray((h * T + i) * T, (h * T + i) * T + L), (h * L + i) * L);
      return p;
    });
    return { tokens: Array.from(tokens), vocab: V, heads: H, logits, probs };
  }

  // The k most likely next tokens after position i (descending; ties: lower id first).
  static topK(ins: Inspection, i: number, k = 10): { token: number; prob: number }[] {
    const row = ins.logits.subarray(i * ins.vocab, (i + 1) * ins.vocab);
    let mx = -Infinity;
    for (const x of row) mx = Math.max(mx, x);
    let sum = 0;
    for (const x of row) sum += Math.exp(x - mx);
    return Array.from(row, (x, t) => ({ token: t, prob: Math.exp(x - mx) / sum }))
      .sort((a, b) => b.prob - a.prob || a.token - b.token)
      .slice(0, k);
  }

  destroy(): void {
    this.exec.destroy();
  }
}
