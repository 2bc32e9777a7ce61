// The serialised program (`ptl program`, engine/program.h): a tensor table and an op list.

export type TensorKind = 'parameter' | 'gradient' | 'optim_state' | 'activation' | 'input' | 'state';
export type DType = 'f32' | 'i32';

export interface TensorInfo {
  name: string;
  kind: TensorKind;
  dtype: DType;
  shape: number[];
  trainable: boolean;
  // The ops [first, last] during which the tensor keeps its value (non-persistent tensors of a
  // program the engine wrote: Program::live_ranges in engine/program.h); memory.ts shares buffers by them.
  live?: [number, number];
}

export type OpKind =
  | 'embedding'
  | 'embedding_backward'
  | 'layernorm'
  | 'layernorm_backward'
  | 'linear'
  | 'linear_backward'
  | 'attention'
  | 'attention_backward'
  | 'kv_cache_write'
  | 'attention_cached'
  | 'attention_probs'
  | 'slice_rows'
  | 'gelu'
  | 'gelu_backward'
  | 'dropout'
  | 'dropout_backward'
  | 'add'
  | 'add_backward'
  | 'cross_entropy'
  | 'cross_entropy_backward'
  | 'cross_entropy_tied'
  | 'cross_entropy_tied_backward'
  | 'grad_norm'
  | 'adamw';

export interface OpInfo {
  op: OpKind;
  inputs: number[]; // tensor ids, -1 = absent
  outputs: number[]; // tensor ids, -1 = not needed
  attrs: Record<string, number>;
}

export interface ProgramJSON {
  format: 'ptl-program';
  version: number;
  name: string;
  tensors: TensorInfo[];
  ops: OpInfo[];
  model_config?: Record<string, number>;
}

export class ProgramError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ProgramError';
  }
}

export function numel(shape: readonly number[]): number {
  return shape.reduce((a, b) => a * b, 1);
}

export function isPersistent(t: TensorInfo): boolean {
  return t.kind === 'parameter' || t.kind === 'optim_state' || t.kind === 'state';
}

// Parses and checks the structure (not the shapes, which each op plan checks).
export function parseProgram(src: string | ProgramJSON): ProgramJSON {
  const p = (typeof src === 'string' ? JSON.parse(src) : src) as ProgramJSON;
  if (p.format !== 'ptl-program') throw new ProgramError("not a serialised program (format is not 'ptl-program')");
  if (p.version !== 1) throw new ProgramError(`unsupported program version ${String(p.version)}`);
  if (!Array.isArray(p.tensors) || !Array.isArray(p.ops)) throw new ProgramError('program has no tensors/ops arrays');
  const names = new Set<string>();
  for (const t of p.tensors) {
    if (names.has(t.name)) throw new ProgramError(`tensor '${t.name}' is declared twice`);
    names.add(t.name);
    if (t.dtype !== 'f32' && t.dtype !== 'i32')
      throw new ProgramError(`tensor '${t.name}' has dtype ${String(t.dtype)}`);
  }
  const end = p.ops.length;
  for (const t of p.tensors) {
    if (t.live === undefined) continue;
    const [first, last] = Array.isArray(t.live) && t.live.length === 2 ? t.live : [NaN, NaN];
    if (!Number.isInteger(first) || !Number.isInteger(last) || first < -1 || first > last || last > end)
      throw new ProgramError(
        `tensor '${t.name}' has live range ${JSON.stringify(t.live)} (two op indices, -1 to ${end})`,
      );
  }
  p.ops.forEach((op, k) => {
    for (const id of [...op.inputs, ...op.outputs]) {
      if (id !== -1 && (id < 0 || id >= p.tensors.length))
        throw new ProgramError(`op ${k} (${op.op}) refers to tensor id ${id}, outside the table`);
      // A range that leaves out an op using the tensor would let another tensor overwrite it.
      const live = id >= 0 ? p.tensors[id]!.live : undefined;
      if (live && (k < live[0] || k > live[1]))
        throw new ProgramError(
          `tensor '${p.tensors[id]!.name}' has live range [${live[0]}, ${live[1]}] but op ${k} (${op.op}) uses it`,
        );
    }
    op.attrs ??= {};
  });
  return p;
}
