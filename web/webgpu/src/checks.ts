// Kernel parity checks: every WGSL kernel against its C++ twin on the same random inputs,
// ragged shapes included. Browser-safe (no node: imports): the Node test (test/kernels.test.mjs)
// and the site's /kernels page run the same cases and differ only in the reference.
//
// Each case is a one-op program. The inputs (and the initial contents of the outputs, which
// matter where acc<i> = 1 and for outputs that must stay untouched) are drawn from a seeded
// generator and given to the reference — `(programJson, safetensors of every tensor) =>
// safetensors of every tensor after one run of the C++ CPU executor`: `ptl_program_run kernel`
// in Node, the WebAssembly engine's runProgram in a browser — and to the WebGPU executor. Every
// compared output must satisfy |gpu - cpu| <= atol + rtol * |cpu| element-wise (fp32 tolerances
// below). A case whose reference does not know the op (an op newer than the reference build)
// is reported as skipped, with the reason.
import { dropoutAttrs } from './dropout.js';
import { type BackendOptions, WebGPUBackend } from './executor.js';
import type { OpKind, ProgramJSON, TensorKind } from './program.js';
import { decodeSafeTensors, encodeSafeTensors } from './safetensors.js';

export type Reference = (programJson: string, safetensors: Uint8Array) => Promise<Uint8Array>;

export interface Tolerance {
  atol: number;
  rtol: number;
}

// Tolerances, by what the kernel computes (fp32 throughout; the CPU sums some reductions in
// double, the GPU sums in a different order, and WGSL exp/log/sqrt are not correctly rounded):
export const TOL = {
  exact: { atol: 0, rtol: 0 }, // same operations in the same order (or a copy)
  elementwise: { atol: 1e-6, rtol: 1e-6 },
  transcendental: { atol: 2e-6, rtol: 1e-5 }, // erf/exp
  reduction: { atol: 2e-5, rtol: 1e-4 }, // sums over up to a few hundred terms
  optimizer: { atol: 1e-6, rtol: 1e-5 },
} satisfies Record<string, Tolerance>;

// Seeded generator (mulberry32) and normal draws (Box-Muller): the same values everywhere.
export interface CaseRng {
  uniform(): number;
  int(n: number): number;
  normal(): number;
}
export function caseRng(seed: number): CaseRng {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return {
    uniform: next,
    int: (n) => Math.floor(next() * n),
    normal: () => {
      const u1 = Math.max(next(), 1e-12),
        u2 = next();
      return Math.sqrt(-2 * Math.log(u1)) * Math.cos(2 * Math.PI * u2);
    },
  };
}

// Max absolute and relative error of `got` against `want`, and whether every element satisfies
// |got - want| <= atol + rtol * |want| (worst = the first failing index, -1 if none).
export function compare(got: ArrayLike<number>, want: ArrayLike<number>, atol: number, rtol: number) {
  let maxAbs = 0,
    maxRel = 0,
    ok = got.length === want.length,
    worst = -1;
  for (let i = 0; i < want.length; i++) {
    const d = Math.abs(got[i]! - want[i]!);
    if (!(d <= atol + rtol * Math.abs(want[i]!))) {
      ok = false;
      if (worst < 0) worst = i;
    }
    if (!(d <= maxAbs)) maxAbs = d;
    const r = d / Math.max(Math.abs(want[i]!), 1e-30);
    if (Math.abs(want[i]!) > 1e-6 && !(r <= maxRel)) maxRel = r;
  }
  return { maxAbs, maxRel, ok, worst };
}

export interface TensorSpec {
  shape: number[];
  dtype?: 'f32' | 'i32';
  kind?: TensorKind; // default 'activation'
  // zero (default), N(0, scale^2), |N(0, 1)| * 0.01, explicit values, or a function of (rng, index)
  init?: 'zero' | 'normal' | 'positive' | number[] | ((r: CaseRng, i: number) => number);
  scale?: number;
}

export interface KernelCase {
  name: string;
  tol: Tolerance;
  seed?: number;
  tensors: Record<string, TensorSpec>; // insertion order = the program's tensor table
  op: { op: string; inputs: (string | null)[]; outputs: (string | null)[]; attrs?: Record<string, number> };
  compareOutputs?: string[]; // default: the op's present outputs (absent ones listed here must stay untouched)
  withForward?: boolean; // attention_backward: y and lse come from the reference's forward on q, k, v
  options?: Partial<BackendOptions>;
  needs?: GPUFeatureName; // skipped where the device lacks this feature
  // A kernel variant that 'auto' never picks (a benchmark candidate forced by name): checked by
  // the Node suite with PTL_WEBGPU_VARIANTS=1 (bench/gpu_run.sh's kernel tests), left out of its
  // default run and of the /kernels page, which check what the product runs (each unrolled
  // variant takes SwiftShader tens of seconds to compile).
  variant?: boolean;
  // Extra property of the GPU result (e.g. exact zeros); returns a failure message or null.
  extra?: (gpu: Map<string, Float32Array | Int32Array>) => string | null;
}

export interface OutputReport {
  max_abs: number;
  max_rel: number;
  n: number;
  first_bad?: { index: number; gpu: number; cpu: number };
}

export interface CaseResult {
  kernel: string;
  case: string;
  matmul_tile: string | number;
  matmul_split: string | number;
  attention_rows: string | number;
  outputs: Record<string, OutputReport>;
  atol: number;
  rtol: number;
  passed: boolean;
  skipped?: string; // why the case did not run (it counts neither as passed nor as failed)
  error?: string; // the reference or the GPU threw
  ms?: number;
}

const tok = (V: number) => (r: CaseRng) => r.int(V);

// ---- the cases -----------------------------------------------------------------------------

export function kernelCases(): KernelCase[] {
  const cases: KernelCase[] = [];
  const add = (c: KernelCase) => cases.push(c);

  // ---- embedding -------------------------------------------------------------------------------
  add({
    name: 'embedding ragged',
    tol: TOL.elementwise,
    tensors: {
      tokens: { shape: [2, 5], dtype: 'i32', init: tok(11) },
      tok_emb: { shape: [11, 7], init: 'normal' },
      pos_emb: { shape: [6, 7], init: 'normal' },
      x: { shape: [2, 5, 7] },
    },
    op: { op: 'embedding', inputs: ['tokens', 'tok_emb', 'pos_emb', null], outputs: ['x'] },
  });
  add({
    name: 'embedding pos0',
    tol: TOL.elementwise,
    tensors: {
      tokens: { shape: [1, 4], dtype: 'i32', init: tok(9) },
      tok_emb: { shape: [9, 6], init: 'normal' },
      pos_emb: { shape: [8, 6], init: 'normal' },
      pos0: { shape: [1], dtype: 'i32', init: [3] },
      x: { shape: [1, 4, 6] },
    },
    op: { op: 'embedding', inputs: ['tokens', 'tok_emb', 'pos_emb', 'pos0'], outputs: ['x'] },
  });
  add({
    name: 'embedding_backward acc tok',
    tol: TOL.exact,
    tensors: {
      dx: { shape: [3, 5, 7], init: 'normal' },
      tokens: { shape: [3, 5], dtype: 'i32', init: tok(6) },
      dtok: { shape: [6, 7], init: 'normal' },
      dpos: { shape: [6, 7], init: 'normal' },
    },
    op: {
      op: 'embedding_backward',
      inputs: ['dx', 'tokens', null],
      outputs: ['dtok', 'dpos'],
      attrs: { acc0: 1, acc1: 0 },
    },
  });
  add({
    name: 'embedding_backward acc pos pos0 wide',
    tol: TOL.exact,
    seed: 2,
    tensors: {
      dx: { shape: [2, 3, 530], init: 'normal' },
      tokens: { shape: [2, 3], dtype: 'i32', init: tok(4) },
      pos0: { shape: [1], dtype: 'i32', init: [2] },
      dtok: { shape: [4, 530], init: 'normal' },
      dpos: { shape: [5, 530], init: 'normal' },
    },
    op: {
      op: 'embedding_backward',
      inputs: ['dx', 'tokens', 'pos0'],
      outputs: ['dtok', 'dpos'],
      attrs: { acc0: 0, acc1: 1 },
    },
  });

  // ---- layernorm -------------------------------------------------------------------------------
  // Each case twice: the workgroup-tree reductions (forced) and the subgroup ones (forced, where
  // the device has 'subgroups'; 'auto' picks them there). Widths below, at and above the 64
  // threads of a row, ragged ones, presets' widths (48, 384, 1280) and 768 / 1024.
  const reductions = [
    ['workgroup', {}],
    ['subgroup', { needs: 'subgroups' as GPUFeatureName }],
  ] as const;
  for (const [C, N] of [
    [37, 6],
    [130, 5],
    [48, 128],
    [64, 3],
    [200, 9],
    [384, 4],
    [768, 3],
    [1024, 5],
    [1280, 2],
  ] as const)
    for (const [red, nd] of reductions)
      add({
        name: `layernorm ${red} C=${C} N=${N}`,
        tol: TOL.reduction,
        seed: C,
        options: { reductions: red },
        ...nd,
        tensors: {
          x: { shape: [N, C], init: (r) => r.normal() * 2 + 0.5 },
          w: { shape: [C], init: 'normal' },
          b: { shape: [C], init: 'normal' },
          y: { shape: [N, C] },
          mean: { shape: [N] },
          rstd: { shape: [N] },
        },
        op: { op: 'layernorm', inputs: ['x', 'w', 'b'], outputs: ['y', 'mean', 'rstd'], attrs: { eps: 1e-5 } },
      });
  for (const [C, N, outs, accs] of [
    [37, 6, ['dx', 'dw', 'db'], [1, 0, 1]],
    [130, 70, ['dx', 'dw', 'db'], [0, 1, 0]],
    [64, 5, ['dx', null, null], [0, 0, 0]],
    [200, 9, ['dx', 'dw', 'db'], [1, 1, 1]],
    [768, 4, ['dx', 'dw', null], [0, 0, 0]],
    [1024, 3, ['dx', 'dw', 'db'], [0, 1, 0]],
  ] as const) {
    // mean and rstd as a forward on the same x would give them (computed here in double).
    const r = caseRng(C + 100);
    const x = Array.from({ length: N * C }, () => r.normal() * 2 + 0.5);
    const mean: number[] = [],
      rstd: number[] = [];
    for (let i = 0; i < N; i++) {
      const row = x.slice(i * C, (i + 1) * C).map(Math.fround);
      const m = row.reduce((a, b) => a + b, 0) / C;
      const v = row.reduce((a, b) => a + (b - m) * (b - m), 0) / C;
      mean.push(m);
      rstd.push(1 / Math.sqrt(v + 1e-5));
    }
    for (const [red, nd] of reductions)
      add({
        name: `layernorm_backward ${red} C=${C} N=${N} out=${outs.map((o) => o ?? '-')} acc=${accs}`,
        tol: TOL.reduction,
        seed: C,
        options: { reductions: red },
        ...nd,
        tensors: {
          dy: { shape: [N, C], init: 'normal' },
          x: { shape: [N, C], init: x },
          w: { shape: [C], init: 'normal' },
          mean: { shape: [N], init: mean },
          rstd: { shape: [N], init: rstd },
          dx: { shape: [N, C], init: 'normal' },
          dw: { shape: [C], init: 'normal' },
          db: { shape: [C], init: 'normal' },
        },
        op: {
          op: 'layernorm_backward',
          inputs: ['dy', 'x', 'w', 'mean', 'rstd'],
          outputs: [...outs],
          attrs: { acc0: accs[0], acc1: accs[1], acc2: accs[2] },
        },
        compareOutputs: ['dx', 'dw', 'db'],
      }); // absent outputs must stay untouched
  }

  // ---- linear ----------------------------------------------------------------------------------
  for (const [M, K, N, bias] of [
    [67, 45, 70, true],
    [64, 48, 128, false],
    [5, 3, 2, true],
    [130, 192, 48, true],
    // At most 4 rows: linear.wgsl's `rows` (a generation step's products).
    [1, 64, 1000, true],
    [4, 130, 37, false],
  ] as const)
    add({
      name: `linear M=${M} K=${K} N=${N}${bias ? ' bias' : ''}`,
      tol: TOL.reduction,
      seed: M * K + N,
      tensors: {
        x: { shape: [M, K], init: 'normal' },
        W: { shape: [N, K], init: 'normal', scale: 0.2 },
        b: { shape: [N], init: 'normal' },
        y: { shape: [M, N] },
      },
      op: { op: 'linear', inputs: ['x', 'W', bias ? 'b' : null], outputs: ['y'] },
    });
  for (const [M, K, N, outs, accs] of [
    [67, 45, 70, ['dx', 'dW', 'db'], [1, 0, 1]],
    [128, 48, 192, ['dx', 'dW', 'db'], [0, 1, 0]],
    [33, 20, 9, [null, 'dW', null], [0, 0, 0]],
    [3, 5, 256, ['dx', 'dW', null], [0, 1, 0]],
    [2, 30, 17, ['dx', null, 'db'], [1, 0, 0]],
  ] as const)
    add({
      name: `linear_backward M=${M} K=${K} N=${N} out=${outs.map((o) => o ?? '-')} acc=${accs}`,
      tol: TOL.reduction,
      seed: M + K * N,
      tensors: {
        dy: { shape: [M, N], init: 'normal' },
        x: { shape: [M, K], init: 'normal' },
        W: { shape: [N, K], init: 'normal', scale: 0.2 },
        dx: { shape: [M, K], init: 'normal' },
        dW: { shape: [N, K], init: 'normal' },
        db: { shape: [N], init: 'normal' },
      },
      op: {
        op: 'linear_backward',
        inputs: ['dy', 'x', 'W'],
        outputs: [...outs],
        attrs: { acc0: accs[0], acc1: accs[1], acc2: accs[2] },
      },
      compareOutputs: ['dx', 'dW', 'db'],
    }); // absent outputs must stay untouched
  // The 128 x 128 tiles (8 x 8 per thread), forced on ragged shapes.
  add({
    name: 'linear 128-tile M=133 K=45 N=70 bias',
    tol: TOL.reduction,
    seed: 3,
    options: { matmulTile: 128 },
    tensors: {
      x: { shape: [133, 45], init: 'normal' },
      W: { shape: [70, 45], init: 'normal', scale: 0.2 },
      b: { shape: [70], init: 'normal' },
      y: { shape: [133, 70] },
    },
    op: { op: 'linear', inputs: ['x', 'W', 'b'], outputs: ['y'] },
  });
  add({
    name: 'linear_backward 128-tile M=131 K=48 N=67 acc=1,0,0',
    tol: TOL.reduction,
    seed: 4,
    options: { matmulTile: 128 },
    tensors: {
      dy: { shape: [131, 67], init: 'normal' },
      x: { shape: [131, 48], init: 'normal' },
      W: { shape: [67, 48], init: 'normal', scale: 0.2 },
      dx: { shape: [131, 48], init: 'normal' },
      dW: { shape: [67, 48], init: 'normal' },
      db: { shape: [67], init: 'normal' },
    },
    op: {
      op: 'linear_backward',
      inputs: ['dy', 'x', 'W'],
      outputs: ['dx', 'dW', 'db'],
      attrs: { acc0: 1, acc1: 0, acc2: 0 },
    },
  });
  // Split-K (partial products over chunks of P, then a fixed-order sum), forced on ragged shapes.
  // 128-tile kernels: linear_nt (forward), linear_wide (BK = 8 and 16; also the forward with
  // matmulNT off), on ragged shapes and on shapes whose leading dimensions are multiples of 4
  // (the vec4 global loads), with split-K.
  add({
    name: 'linear 128-tile wide BK=16 M=133 K=45 N=70 bias',
    tol: TOL.reduction,
    seed: 7,
    options: { matmulTile: 128, matmulBK: 16, matmulNT: false },
    tensors: {
      x: { shape: [133, 45], init: 'normal' },
      W: { shape: [70, 45], init: 'normal', scale: 0.2 },
      b: { shape: [70], init: 'normal' },
      y: { shape: [133, 70] },
    },
    op: { op: 'linear', inputs: ['x', 'W', 'b'], outputs: ['y'] },
  });
  for (const bk of [8, 16] as const) {
    add({
      name: `linear_backward 128-tile BK=${bk} M=136 K=52 N=132 acc=0,1,0`,
      tol: TOL.reduction,
      seed: 8 + bk,
      options: { matmulTile: 128, matmulBK: bk },
      tensors: {
        dy: { shape: [136, 132], init: 'normal' },
        x: { shape: [136, 52], init: 'normal' },
        W: { shape: [132, 52], init: 'normal', scale: 0.2 },
        dx: { shape: [136, 52], init: 'normal' },
        dW: { shape: [132, 52], init: 'normal' },
        db: { shape: [132], init: 'normal' },
      },
      op: {
        op: 'linear_backward',
        inputs: ['dy', 'x', 'W'],
        outputs: ['dx', 'dW', 'db'],
        attrs: { acc0: 0, acc1: 1, acc2: 0 },
      },
    });
  }
  for (const nt of [true, false]) {
    add({
      name: `linear 128-tile ${nt ? 'nt' : 'wide'} M=132 K=36 N=136 bias`,
      tol: TOL.reduction,
      seed: 9,
      options: { matmulTile: 128, matmulNT: nt },
      tensors: {
        x: { shape: [132, 36], init: 'normal' },
        W: { shape: [136, 36], init: 'normal', scale: 0.2 },
        b: { shape: [136], init: 'normal' },
        y: { shape: [132, 136] },
      },
      op: { op: 'linear', inputs: ['x', 'W', 'b'], outputs: ['y'] },
    });
  }
  add({
    name: 'linear 128-tile nt split-K 3 M=140 K=100 N=20 bias',
    tol: TOL.reduction,
    seed: 13,
    options: { matmulTile: 128, matmulSplit: 3 },
    tensors: {
      x: { shape: [140, 100], init: 'normal' },
      W: { shape: [20, 100], init: 'normal', scale: 0.2 },
      b: { shape: [20], init: 'normal' },
      y: { shape: [140, 20] },
    },
    op: { op: 'linear', inputs: ['x', 'W', 'b'], outputs: ['y'] },
  });
  add({
    name: 'linear_backward split-K 3 128-tile BK=16 M=200 K=40 N=24 acc=1,1,0',
    tol: TOL.reduction,
    seed: 12,
    options: { matmulSplit: 3, matmulTile: 128, matmulBK: 16 },
    tensors: {
      dy: { shape: [200, 24], init: 'normal' },
      x: { shape: [200, 40], init: 'normal' },
      W: { shape: [24, 40], init: 'normal', scale: 0.2 },
      dx: { shape: [200, 40], init: 'normal' },
      dW: { shape: [24, 40], init: 'normal' },
      db: { shape: [24], init: 'normal' },
    },
    op: {
      op: 'linear_backward',
      inputs: ['dy', 'x', 'W'],
      outputs: ['dx', 'dW', 'db'],
      attrs: { acc0: 1, acc1: 1, acc2: 0 },
    },
  });
  add({
    name: 'linear split-K 3 M=37 K=70 N=29 bias',
    tol: TOL.reduction,
    seed: 5,
    options: { matmulSplit: 3 },
    tensors: {
      x: { shape: [37, 70], init: 'normal' },
      W: { shape: [29, 70], init: 'normal', scale: 0.2 },
      b: { shape: [29], init: 'normal' },
      y: { shape: [37, 29] },
    },
    op: { op: 'linear', inputs: ['x', 'W', 'b'], outputs: ['y'] },
  });
  add({
    name: 'linear_backward split-K 4 128-tile M=300 K=36 N=20 acc=0,1,1',
    tol: TOL.reduction,
    seed: 6,
    options: { matmulSplit: 4, matmulTile: 128 },
    tensors: {
      dy: { shape: [300, 20], init: 'normal' },
      x: { shape: [300, 36], init: 'normal' },
      W: { shape: [20, 36], init: 'normal', scale: 0.2 },
      dx: { shape: [300, 36], init: 'normal' },
      dW: { shape: [20, 36], init: 'normal' },
      db: { shape: [20], init: 'normal' },
    },
    op: {
      op: 'linear_backward',
      inputs: ['dy', 'x', 'W'],
      outputs: ['dx', 'dW', 'db'],
      attrs: { acc0: 0, acc1: 1, acc2: 1 },
    },
  });

  // The generated kernel (linear_tiled, src/linear_gen.ts), forced, per configuration: ragged
  // shapes (checked loads), shapes with full tiles and leading dimensions that are multiples of 4
  // (the unchecked vec4 path and its per-step offsets), the three layouts, bias, acc, split-K.
  // The default configuration gets every case, the others the cases that reach their own code
  // (SwiftShader compiles each unrolled configuration slowly).
  //   fr: forward, ragged, bias; fa: forward, aligned; ba: backward (dx, dW acc, db), aligned;
  //   bs: backward, ragged, split-K 3.
  const tiledCases: [string, string[], GPUFeatureName?][] = [
    ['128x128/8x8/k16/db0/tr1', ['fr', 'fa', 'ba', 'bs']],
    ['64x64/4x4/k16/tr1', ['ba']],
    ['128x128/8x8/k8', ['ba']],
    ['128x128/8x8/k16/pad0/u0', ['fa']],
    ['128x128/8x8/k16/map1/sw1/pad0', ['fr']],
    ['128x128/8x8/k32/db0/pad0', ['ba']],
    ['128x256/8x16/k8/u0', ['fa']],
    ['128x64/8x4/k16/u0', ['bs']],
    ['128x128/8x8/k8/map1/sg1/u0', ['fr', 'ba'], 'subgroups'],
  ];
  for (const [cfg, kinds, needs] of tiledCases) {
    const o = { matmulTiled: cfg };
    const nd = { ...(needs ? { needs } : {}), ...(cfg === '128x128/8x8/k16/db0/tr1' ? {} : { variant: true }) };
    if (kinds.includes('fr'))
      add({
        name: `linear tiled ${cfg} M=133 K=45 N=70 bias`,
        tol: TOL.reduction,
        seed: 21,
        options: o,
        ...nd,
        tensors: {
          x: { shape: [133, 45], init: 'normal' },
          W: { shape: [70, 45], init: 'normal', scale: 0.2 },
          b: { shape: [70], init: 'normal' },
          y: { shape: [133, 70] },
        },
        op: { op: 'linear', inputs: ['x', 'W', 'b'], outputs: ['y'] },
      });
    if (kinds.includes('fa'))
      add({
        name: `linear tiled ${cfg} M=260 K=72 N=264`,
        tol: TOL.reduction,
        seed: 22,
        options: o,
        ...nd,
        tensors: {
          x: { shape: [260, 72], init: 'normal' },
          W: { shape: [264, 72], init: 'normal', scale: 0.2 },
          y: { shape: [260, 264] },
        },
        op: { op: 'linear', inputs: ['x', 'W', null], outputs: ['y'] },
      });
    if (kinds.includes('ba'))
      add({
        name: `linear_backward tiled ${cfg} M=264 K=264 N=260 acc=1,1,0`,
        tol: TOL.reduction,
        seed: 23,
        options: o,
        ...nd,
        tensors: {
          dy: { shape: [264, 260], init: 'normal' },
          x: { shape: [264, 264], init: 'normal' },
          W: { shape: [260, 264], init: 'normal', scale: 0.2 },
          dx: { shape: [264, 264], init: 'normal' },
          dW: { shape: [260, 264], init: 'normal' },
          db: { shape: [260], init: 'normal' },
        },
        op: {
          op: 'linear_backward',
          inputs: ['dy', 'x', 'W'],
          outputs: ['dx', 'dW', 'db'],
          attrs: { acc0: 1, acc1: 1, acc2: 0 },
        },
      });
    if (kinds.includes('bs'))
      add({
        name: `linear_backward tiled ${cfg} split-K 3 M=150 K=37 N=29 acc=0,1,0`,
        tol: TOL.reduction,
        seed: 24,
        options: { ...o, matmulSplit: 3 },
        ...nd,
        tensors: {
          dy: { shape: [150, 29], init: 'normal' },
          x: { shape: [150, 37], init: 'normal' },
          W: { shape: [29, 37], init: 'normal', scale: 0.2 },
          dx: { shape: [150, 37], init: 'normal' },
          dW: { shape: [29, 37], init: 'normal' },
          db: { shape: [29], init: 'normal' },
        },
        op: {
          op: 'linear_backward',
          inputs: ['dy', 'x', 'W'],
          outputs: ['dx', 'dW', 'db'],
          attrs: { acc0: 0, acc1: 1, acc2: 0 },
        },
      });
  }

  // ---- attention -------------------------------------------------------------------------------
  for (const [B, T, C, H, rows] of [
    [2, 7, 12, 3],
    [1, 70, 32, 2],
    [1, 70, 32, 2, 32],
    [2, 20, 96, 2],
    [4, 32, 48, 3],
  ] as const)
    add({
      name: `attention B=${B} T=${T} C=${C} H=${H}${rows ? ` rows=${rows}` : ''}`,
      tol: TOL.reduction,
      seed: T * C,
      options: rows ? { attentionRows: rows as 32 } : undefined,
      tensors: {
        q: { shape: [B, T, C], init: 'normal' },
        k: { shape: [B, T, C], init: 'normal' },
        v: { shape: [B, T, C], init: 'normal' },
        y: { shape: [B, T, C] },
        lse: { shape: [B, H, T] },
      },
      op: { op: 'attention', inputs: ['q', 'k', 'v'], outputs: ['y', 'lse'], attrs: { heads: H } },
    });
  for (const [B, T, C, H, accs, rows] of [
    [2, 7, 12, 3, [0, 1, 0]],
    [1, 70, 32, 2, [1, 0, 1]],
    [1, 70, 32, 2, [1, 0, 1], 32],
    [2, 20, 96, 2, [0, 0, 0]],
  ] as const)
    add({
      name: `attention_backward B=${B} T=${T} C=${C} H=${H} acc=${accs}${rows ? ` rows=${rows}` : ''}`,
      tol: TOL.reduction,
      seed: T * C + 1,
      options: rows ? { attentionRows: rows as 32 } : undefined,
      withForward: true,
      tensors: {
        q: { shape: [B, T, C], init: 'normal' },
        k: { shape: [B, T, C], init: 'normal' },
        v: { shape: [B, T, C], init: 'normal' },
        dy: { shape: [B, T, C], init: 'normal' },
        y: { shape: [B, T, C] },
        lse: { shape: [B, H, T] },
        dq: { shape: [B, T, C], init: 'normal' },
        dk: { shape: [B, T, C], init: 'normal' },
        dv: { shape: [B, T, C], init: 'normal' },
      },
      op: {
        op: 'attention_backward',
        inputs: ['dy', 'q', 'k', 'v', 'y', 'lse'],
        outputs: ['dq', 'dk', 'dv'],
        attrs: { heads: H, acc0: accs[0], acc1: accs[1], acc2: accs[2] },
      },
    });

  // ---- dropout (docs/model.md "Dropout"): the masks must be the engine's, element for element --------
  // A key above 2^31 checks that dropout.seed's i32 is read as u32.
  const dseed = { shape: [2], dtype: 'i32', kind: 'input', init: [0x9e3779b9 | 0, 7] } satisfies TensorSpec;
  for (const p of [0.1, 0.5])
    add({
      name: `dropout p=${p}`,
      tol: TOL.exact,
      seed: 101,
      tensors: { x: { shape: [3001], init: 'normal' }, 'dropout.seed': dseed, y: { shape: [3001], init: 'normal' } },
      op: { op: 'dropout', inputs: ['x', 'dropout.seed'], outputs: ['y'], attrs: dropoutAttrs(p, 'blocks.1.mlp.drop') },
    });
  for (const acc of [0, 1])
    add({
      name: `dropout_backward acc=${acc}`,
      tol: TOL.elementwise,
      seed: 102,
      tensors: { dy: { shape: [3001], init: 'normal' }, 'dropout.seed': dseed, dx: { shape: [3001], init: 'normal' } },
      op: {
        op: 'dropout_backward',
        inputs: ['dy', 'dropout.seed'],
        outputs: ['dx'],
        attrs: { ...dropoutAttrs(0.3, 'emb.drop'), acc0: acc },
      },
    });
  for (const [B, T, C, H, rows] of [
    [2, 7, 12, 3],
    [1, 70, 32, 2],
    [1, 70, 32, 2, 32],
  ] as const) {
    const attrs = { heads: H, ...dropoutAttrs(0.2, 'blocks.0.attn.probs.drop') };
    const opts = rows ? { attentionRows: rows as 32 } : undefined;
    add({
      name: `attention dropout B=${B} T=${T} C=${C} H=${H}${rows ? ` rows=${rows}` : ''}`,
      tol: TOL.reduction,
      seed: T * C + 5,
      options: opts,
      tensors: {
        q: { shape: [B, T, C], init: 'normal' },
        k: { shape: [B, T, C], init: 'normal' },
        v: { shape: [B, T, C], init: 'normal' },
        'dropout.seed': dseed,
        y: { shape: [B, T, C] },
        lse: { shape: [B, H, T] },
      },
      op: { op: 'attention', inputs: ['q', 'k', 'v', 'dropout.seed'], outputs: ['y', 'lse'], attrs },
    });
    add({
      name: `attention_backward dropout B=${B} T=${T} C=${C} H=${H}${rows ? ` rows=${rows}` : ''}`,
      tol: TOL.reduction,
      seed: T * C + 6,
      options: opts,
      withForward: true,
      tensors: {
        q: { shape: [B, T, C], init: 'normal' },
        k: { shape: [B, T, C], init: 'normal' },
        v: { shape: [B, T, C], init: 'normal' },
        dy: { shape: [B, T, C], init: 'normal' },
        'dropout.seed': dseed,
        y: { shape: [B, T, C] },
        lse: { shape: [B, H, T] },
        dq: { shape: [B, T, C], init: 'normal' },
        dk: { shape: [B, T, C], init: 'normal' },
        dv: { shape: [B, T, C], init: 'normal' },
      },
      op: {
        op: 'attention_backward',
        inputs: ['dy', 'q', 'k', 'v', 'y', 'lse', 'dropout.seed'],
        outputs: ['dq', 'dk', 'dv'],
        attrs: { ...attrs, acc0: 1, acc1: 0, acc2: 1 },
      },
    });
  }

  // ---- generation: KV cache ----------------------------------------------------------------------
  // The caches hold random values everywhere: rows outside pos0 .. pos0 + n - 1 must come back
  // untouched (kv_cache_write) and rows past pos0 + n - 1 must not be read (attention_cached).
  for (const [n, C, ctx, pos0] of [
    [3, 12, 10, 4],
    [1, 37, 5, 4],
    [6, 20, 6, 0],
  ] as const)
    add({
      name: `kv_cache_write n=${n} C=${C} ctx=${ctx} pos0=${pos0}`,
      tol: TOL.exact,
      seed: n * C + pos0,
      tensors: {
        k: { shape: [1, n, C], init: 'normal' },
        v: { shape: [1, n, C], init: 'normal' },
        pos0: { shape: [1], dtype: 'i32', init: [pos0] },
        k_cache: { shape: [ctx, C], init: 'normal' },
        v_cache: { shape: [ctx, C], init: 'normal' },
      },
      op: { op: 'kv_cache_write', inputs: ['k', 'v', 'pos0'], outputs: ['k_cache', 'v_cache'] },
    });
  // slice_rows: the last row of a prompt's (as generation uses it), a run from the middle, all rows.
  for (const [rows, C, first, n] of [
    [7, 12, 6, 1],
    [9, 37, 2, 4],
    [3, 260, 0, 3],
  ] as const)
    add({
      name: `slice_rows rows=${rows} C=${C} first=${first} n=${n}`,
      tol: TOL.exact,
      seed: rows * C + first,
      tensors: {
        x: { shape: [1, rows, C], init: 'normal' },
        y: { shape: [1, n, C], init: 'normal' },
      },
      op: { op: 'slice_rows', inputs: ['x'], outputs: ['y'], attrs: { first } },
    });
  // [n, C, H, ctx, pos0]: one decode step early and late, a prefill block, keys across two
  // 64-key tiles, head sizes 4, 16, 48, 96 and 130 (more columns than threads).
  for (const [n, C, H, ctx, pos0] of [
    [1, 12, 3, 10, 6],
    [1, 12, 3, 10, 0],
    [5, 32, 2, 12, 7],
    [4, 32, 2, 80, 66],
    [3, 96, 2, 20, 0],
    [2, 96, 1, 70, 65],
    [1, 130, 1, 9, 3],
  ] as const)
    add({
      name: `attention_cached n=${n} C=${C} H=${H} ctx=${ctx} pos0=${pos0}`,
      tol: TOL.reduction,
      seed: C * ctx + pos0,
      tensors: {
        q: { shape: [1, n, C], init: 'normal' },
        k_cache: { shape: [ctx, C], init: 'normal' },
        v_cache: { shape: [ctx, C], init: 'normal' },
        pos0: { shape: [1], dtype: 'i32', init: [pos0] },
        y: { shape: [1, n, C], init: 'normal' },
      },
      op: { op: 'attention_cached', inputs: ['q', 'k_cache', 'v_cache', 'pos0'], outputs: ['y'], attrs: { heads: H } },
    });

  // ---- attention_probs (inspection) --------------------------------------------------------------
  for (const [B, T, C, H] of [
    [2, 7, 12, 3],
    [1, 70, 32, 2],
    [1, 5, 130, 1],
  ] as const)
    add({
      name: `attention_probs B=${B} T=${T} C=${C} H=${H}`,
      tol: TOL.reduction,
      seed: T * C + 7,
      tensors: {
        q: { shape: [B, T, C], init: 'normal' },
        k: { shape: [B, T, C], init: 'normal' },
        probs: { shape: [B, H, T, T], init: 'normal' },
      },
      op: { op: 'attention_probs', inputs: ['q', 'k'], outputs: ['probs'], attrs: { heads: H } },
      extra: (gpu) => {
        // Above the diagonal: exactly 0; each row sums to 1 (within fp32 rounding).
        const p = gpu.get('probs')!;
        for (let r = 0; r < B * H * T; r++) {
          const i = r % T;
          let s = 0;
          for (let j = 0; j < T; j++) {
            const x = p[r * T + j]!;
            if (j > i && x !== 0) return `probs row ${r} has ${x} at key ${j} > query ${i}`;
            s += x;
          }
          if (Math.abs(s - 1) > 1e-5) return `probs row ${r} sums to ${s}`;
        }
        return null;
      },
    });

  // ---- gelu, add -------------------------------------------------------------------------------
  add({
    name: 'gelu',
    tol: TOL.transcendental,
    tensors: {
      x: { shape: [1001], init: (r, i) => (i < 200 ? (i - 100) / 10 : r.normal() * 3) },
      y: { shape: [1001] },
    },
    op: { op: 'gelu', inputs: ['x'], outputs: ['y'] },
  });
  add({
    name: 'gelu_backward acc',
    tol: TOL.transcendental,
    tensors: {
      dy: { shape: [3, 337], init: 'normal' },
      x: { shape: [3, 337], init: (r) => r.normal() * 3 },
      dx: { shape: [3, 337], init: 'normal' },
    },
    op: { op: 'gelu_backward', inputs: ['dy', 'x'], outputs: ['dx'], attrs: { acc0: 1 } },
  });
  // GPT-2's tanh form (attribute tanh = 1): large |x| too, where the exp saturates.
  add({
    name: 'gelu tanh',
    tol: TOL.transcendental,
    tensors: {
      x: { shape: [1001], init: (r, i) => (i < 200 ? (i - 100) / 10 : i < 210 ? (i - 205) * 40 : r.normal() * 3) },
      y: { shape: [1001] },
    },
    op: { op: 'gelu', inputs: ['x'], outputs: ['y'], attrs: { tanh: 1 } },
  });
  add({
    name: 'gelu_backward tanh',
    tol: TOL.transcendental,
    tensors: {
      dy: { shape: [3, 337], init: 'normal' },
      x: { shape: [3, 337], init: (r, i) => (i < 10 ? (i - 5) * 40 : r.normal() * 3) },
      dx: { shape: [3, 337], init: 'normal' },
    },
    op: { op: 'gelu_backward', inputs: ['dy', 'x'], outputs: ['dx'], attrs: { acc0: 0, tanh: 1 } },
  });
  add({
    name: 'add alpha=-0.5',
    tol: TOL.elementwise,
    tensors: { a: { shape: [1001], init: 'normal' }, b: { shape: [1001], init: 'normal' }, y: { shape: [1001] } },
    op: { op: 'add', inputs: ['a', 'b'], outputs: ['y'], attrs: { alpha: -0.5 } },
  });
  add({
    name: 'add_backward acc',
    tol: TOL.elementwise,
    tensors: {
      dy: { shape: [7, 41], init: 'normal' },
      da: { shape: [7, 41], init: 'normal' },
      db: { shape: [7, 41], init: 'normal' },
    },
    op: { op: 'add_backward', inputs: ['dy'], outputs: ['da', 'db'], attrs: { acc0: 1, acc1: 0, alpha: 0.5 } },
  });
  add({
    name: 'add_backward db absent',
    tol: TOL.elementwise,
    tensors: {
      dy: { shape: [300], init: 'normal' },
      da: { shape: [300], init: 'normal' },
      db: { shape: [300], init: 'normal' },
    },
    op: { op: 'add_backward', inputs: ['dy'], outputs: ['da', null], attrs: { acc0: 0, alpha: 1 } },
    compareOutputs: ['da', 'db'],
  });

  // ---- cross-entropy ---------------------------------------------------------------------------
  add({
    name: 'cross_entropy',
    tol: TOL.reduction,
    tensors: {
      logits: { shape: [13, 37], init: (r) => r.normal() * 3 },
      targets: { shape: [13], dtype: 'i32', init: tok(37) },
      loss: { shape: [1] },
      lse: { shape: [13] },
    },
    op: { op: 'cross_entropy', inputs: ['logits', 'targets', null], outputs: ['loss', 'lse'] },
  });
  add({
    name: 'cross_entropy mask',
    tol: TOL.reduction,
    seed: 5,
    tensors: {
      logits: { shape: [300, 256], init: (r) => r.normal() * 2 },
      targets: { shape: [300], dtype: 'i32', init: tok(256) },
      mask: { shape: [300], init: (r) => (r.uniform() < 0.3 ? 0 : 1) },
      loss: { shape: [1] },
      lse: { shape: [300] },
    },
    op: { op: 'cross_entropy', inputs: ['logits', 'targets', 'mask'], outputs: ['loss', 'lse'] },
  });
  {
    const r = caseRng(9);
    const M = 13,
      V = 37;
    const logits = Array.from({ length: M * V }, () => Math.fround(r.normal() * 3));
    const lse: number[] = [];
    for (let i = 0; i < M; i++) {
      const row = logits.slice(i * V, (i + 1) * V);
      const m = Math.max(...row);
      lse.push(m + Math.log(row.reduce((a, z) => a + Math.exp(z - m), 0)));
    }
    add({
      name: 'cross_entropy_backward',
      tol: TOL.transcendental,
      tensors: {
        logits: { shape: [M, V], init: logits },
        targets: { shape: [M], dtype: 'i32', init: tok(V) },
        lse: { shape: [M], init: lse },
        dlogits: { shape: [M, V], init: 'normal' },
      },
      op: {
        op: 'cross_entropy_backward',
        inputs: ['logits', 'targets', 'lse', null],
        outputs: ['dlogits'],
        attrs: { acc0: 0 },
      },
    });
  }
  add({
    name: 'cross_entropy_backward mask no lse acc',
    tol: TOL.transcendental,
    seed: 11,
    tensors: {
      logits: { shape: [70, 100], init: (r) => r.normal() * 3 },
      targets: { shape: [70], dtype: 'i32', init: tok(100) },
      mask: { shape: [70], init: (r) => (r.uniform() < 0.4 ? 0 : 0.5 + r.uniform()) },
      dlogits: { shape: [70, 100], init: 'normal' },
    },
    op: {
      op: 'cross_entropy_backward',
      inputs: ['logits', 'targets', null, 'mask'],
      outputs: ['dlogits'],
      attrs: { acc0: 1 },
    },
  });

  // ---- cross_entropy_tied: the tied projection and the loss over chunks of the vocabulary ------
  // An odd vocabulary in chunks of 64 rows (ragged last chunk) and in one chunk, and GPT-2's
  // 50,257 in chunks of 4,096, with tiny widths and row counts (SwiftShader is slow).
  for (const [V, M, C, chunk, masked] of [
    [263, 7, 12, 64, true],
    [263, 5, 8, 'auto', false],
    [50257, 3, 4, 4096, true],
  ] as const) {
    const r = caseRng(V + M);
    const x = Array.from({ length: M * C }, () => Math.fround(r.normal()));
    const W = Array.from({ length: V * C }, () => Math.fround(r.normal() * 0.5));
    const targets = Array.from({ length: M }, (_, i) => (i * 7919 + 13) % V);
    targets[M - 1] = V - 1; // the last row of the last chunk
    const mask = Array.from({ length: M }, (_, i) => (i === 1 ? 0 : i === 2 ? 0.5 : 1));
    // lse of the logits x W^T, in double (the backward's input, as the forward would give it).
    const lse = Array.from({ length: M }, (_, i) => {
      const z = Array.from({ length: V }, (_, v) => {
        let d = 0;
        for (let k = 0; k < C; k++) d += x[i * C + k]! * W[v * C + k]!;
        return d;
      });
      const m = z.reduce((a, b) => Math.max(a, b), -Infinity);
      return m + Math.log(z.reduce((a, b) => a + Math.exp(b - m), 0));
    });
    const common = {
      x: { shape: [M, C], init: x },
      W: { shape: [V, C], init: W },
      targets: { shape: [M], dtype: 'i32' as const, init: targets },
      mask: { shape: [M], init: mask },
    };
    const tag = `V=${V} M=${M} C=${C} chunk=${chunk}${masked ? ' mask' : ''}`;
    const options = { vocabChunk: chunk };
    add({
      name: `cross_entropy_tied ${tag}`,
      tol: TOL.reduction,
      options,
      tensors: { ...common, loss: { shape: [1] }, lse: { shape: [M] } },
      op: { op: 'cross_entropy_tied', inputs: ['x', 'W', 'targets', masked ? 'mask' : null], outputs: ['loss', 'lse'] },
    });
    add({
      name: `cross_entropy_tied_backward ${tag}${masked ? ' acc dx' : ''}`,
      tol: TOL.reduction,
      options,
      tensors: {
        ...common,
        lse: { shape: [M], init: lse },
        dx: { shape: [M, C], init: 'normal' },
        dW: { shape: [V, C], init: 'normal', scale: 0.01 },
      },
      op: {
        op: 'cross_entropy_tied_backward',
        inputs: ['x', 'W', 'targets', 'lse', masked ? 'mask' : null],
        outputs: ['dx', 'dW'],
        attrs: { acc0: masked ? 1 : 0, acc1: 0 },
      },
    });
  }
  add({
    name: 'cross_entropy_tied_backward dW only, accumulating',
    tol: TOL.reduction,
    seed: 3,
    options: { vocabChunk: 64 },
    tensors: {
      x: { shape: [4, 8], init: 'normal' },
      W: { shape: [150, 8], init: 'normal', scale: 0.5 },
      targets: { shape: [4], dtype: 'i32', init: [0, 149, 64, 70] },
      lse: { shape: [4], init: [6, 5.5, 5, 7] }, // any values: both sides use the same
      dx: { shape: [4, 8], init: 'normal' },
      dW: { shape: [150, 8], init: 'normal', scale: 0.01 },
    },
    op: {
      op: 'cross_entropy_tied_backward',
      inputs: ['x', 'W', 'targets', 'lse', null],
      outputs: [null, 'dW'],
      attrs: { acc1: 1 },
    },
    compareOutputs: ['dx', 'dW'], // dx absent: untouched
  });

  // ---- grad_norm, adamw ------------------------------------------------------------------------
  add({
    name: 'grad_norm',
    tol: TOL.optimizer,
    tensors: {
      g0: { shape: [5], init: 'normal' },
      g1: { shape: [3, 1000], init: 'normal', scale: 0.01 },
      g2: { shape: [77], init: 'normal' },
      g3: { shape: [4097], init: 'normal' },
      norm: { shape: [1] },
    },
    op: { op: 'grad_norm', inputs: ['g0', 'g1', 'g2', 'g3'], outputs: ['norm'] },
  });
  for (const [normv, wd, step] of [
    [3.5, 0.1, 1],
    [0.2, 0.0, 7],
    [25, 0.1, 1000],
  ] as const)
    add({
      name: `adamw norm=${normv} wd=${wd} step=${step}`,
      tol: TOL.optimizer,
      seed: step,
      tensors: {
        p: { shape: [1001], init: 'normal' },
        g: { shape: [1001], init: 'normal', scale: 0.1 },
        m: { shape: [1001], init: 'normal', scale: 0.01 },
        v: { shape: [1001], init: 'positive' },
        norm: { shape: [1], init: [normv] },
        'optim.hparams': { shape: [2], kind: 'input', init: [3e-4, step] },
      },
      op: {
        op: 'adamw',
        inputs: ['p', 'g', 'm', 'v', 'norm', 'optim.hparams'],
        outputs: ['p', 'm', 'v'],
        attrs: { beta1: 0.9, beta2: 0.95, eps: 1e-8, weight_decay: wd, max_norm: 1.0 },
      },
    });
  return cases;
}

// ---- running -------------------------------------------------------------------------------

// Backends with non-default options share the device of the given one (created once per set).
const variants = new WeakMap<WebGPUBackend, Map<string, WebGPUBackend>>();
function backendFor(base: WebGPUBackend, options: KernelCase['options']): WebGPUBackend {
  if (!options) return base;
  const key = JSON.stringify(options);
  let m = variants.get(base);
  if (!m) variants.set(base, (m = new Map()));
  let be = m.get(key);
  if (!be) {
    be = new WebGPUBackend(base.device, base.kernels, options);
    m.set(key, be);
  }
  return be;
}

// The case's program and input values (deterministic in the case's seed).
export function caseProgram(c: KernelCase) {
  const r = caseRng(c.seed ?? 1);
  const names = Object.keys(c.tensors);
  const id = (n: string | null) => (n === null ? -1 : names.indexOf(n));
  const program: ProgramJSON = {
    format: 'ptl-program',
    version: 1,
    name: c.name,
    tensors: names.map((n) => ({
      name: n,
      kind: c.tensors[n]!.kind ?? 'activation',
      dtype: c.tensors[n]!.dtype ?? 'f32',
      shape: c.tensors[n]!.shape,
      trainable: false,
    })),
    ops: [
      { op: c.op.op as OpKind, inputs: c.op.inputs.map(id), outputs: c.op.outputs.map(id), attrs: c.op.attrs ?? {} },
    ],
  };
  const values: Record<string, Float32Array | Int32Array> = {};
  for (const n of names) {
    const t = c.tensors[n]!;
    const count = t.shape.reduce((a, b) => a * b, 1);
    let v: number[];
    if (Array.isArray(t.init)) v = t.init;
    else if (typeof t.init === 'function') {
      const fn = t.init;
      v = Array.from({ length: count }, (_, i) => fn(r, i));
    } else if (t.init === 'zero' || t.init === undefined) v = new Array<number>(count).fill(0);
    else if (t.init === 'positive') v = Array.from({ length: count }, () => Math.abs(r.normal()) * 0.01);
    else v = Array.from({ length: count }, () => r.normal() * (t.scale ?? 1));
    values[n] = (t.dtype ?? 'f32') === 'i32' ? Int32Array.from(v) : Float32Array.from(v);
  }
  return { program, values, names };
}

function st(names: string[], c: KernelCase, values: Record<string, Float32Array | Int32Array>): Uint8Array {
  return encodeSafeTensors({
    metadata: {},
    tensors: names.map((n) => ({
      name: n,
      dtype: values[n] instanceof Int32Array ? 'I32' : 'F32',
      shape: c.tensors[n]!.shape,
      data: values[n]!,
    })),
  });
}

// A reference error that means "this op is newer than the reference build" (the C++ message of
// op_kind_from_string).
const UNKNOWN_OP = /unknown op '([a-z_]+)'/;

export async function runKernelCase(backend: WebGPUBackend, reference: Reference, c: KernelCase): Promise<CaseResult> {
  const t0 = typeof performance !== 'undefined' ? performance.now() : Date.now();
  const o = c.options ?? {};
  const report: CaseResult = {
    kernel: c.op.op,
    case: c.name,
    matmul_tile: o.matmulTile ?? 'auto',
    matmul_split: o.matmulSplit ?? 'auto',
    attention_rows: o.attentionRows ?? 'auto',
    outputs: {},
    atol: c.tol.atol,
    rtol: c.tol.rtol,
    passed: false,
  };
  if (c.needs && !backend.device.features.has(c.needs)) {
    report.skipped = `the device has no '${c.needs}'`;
    return report;
  }
  const { program, values, names } = caseProgram(c);
  // ---- reference ----
  let cpu: Map<string, Float32Array | Int32Array>;
  try {
    if (c.withForward) {
      // y and lse of attention_backward must be the forward's: run the reference forward first.
      const id = (n: string) => names.indexOf(n);
      const fwd = {
        ...program,
        name: `${c.name} forward`,
        ops: [
          {
            op: 'attention' as OpKind,
            // With dropout, the forward's dropped y (the backward's D_i = dy_i . y_i).
            inputs: [id('q'), id('k'), id('v'), ...(c.op.inputs[6] ? [id(c.op.inputs[6])] : [])],
            outputs: [id('y'), id('lse')],
            attrs: Object.fromEntries(
              Object.entries(c.op.attrs!).filter(([key]) =>
                ['heads', 'p', 'threshold', 'scale', 'stream'].includes(key),
              ),
            ),
          },
        ],
      };
      const out = decodeSafeTensors(
        await reference(JSON.stringify(fwd), st(names, c, values)),
        `${c.name}: reference forward output`,
      );
      for (const t of out.tensors) if (t.name === 'y' || t.name === 'lse') values[t.name] = t.data;
    }
    const out = decodeSafeTensors(
      await reference(JSON.stringify(program), st(names, c, values)),
      `${c.name}: reference output`,
    );
    cpu = new Map(out.tensors.map((t) => [t.name, t.data]));
  } catch (e) {
    const msg = (e as Error).message ?? String(e);
    const m = UNKNOWN_OP.exec(msg);
    if (m && m[1] === c.op.op)
      report.skipped = `the reference does not know op '${c.op.op}' yet (rebuild it): ${msg.trim().split('\n').pop()}`;
    else report.error = `reference failed: ${msg}`;
    return report;
  }
  // ---- WebGPU ----
  const be = backendFor(backend, c.options);
  try {
    const ex = await be.load(program);
    try {
      for (const n of names) {
        if (n === 'optim.hparams' || n === 'dropout.seed') ex.setInput(n, values[n]!);
        else ex.write(n, values[n]!);
      }
      ex.run();
      const outs = c.compareOutputs ?? c.op.outputs.filter((n): n is string => n !== null);
      const gpu = new Map<string, Float32Array | Int32Array>();
      report.passed = true;
      for (const n of new Set(outs)) {
        const got = await ex.read(n);
        gpu.set(n, got);
        const want = cpu.get(n);
        if (!want) throw new Error(`the reference returned no tensor '${n}'`);
        const cmp = compare(got, want, c.tol.atol, c.tol.rtol);
        const o: OutputReport = { max_abs: cmp.maxAbs, max_rel: cmp.maxRel, n: got.length };
        if (!cmp.ok) {
          report.passed = false;
          o.first_bad = { index: cmp.worst, gpu: got[cmp.worst] ?? NaN, cpu: want[cmp.worst] ?? NaN };
        }
        report.outputs[n] = o;
      }
      const extra = c.extra?.(gpu);
      if (extra) {
        report.passed = false;
        report.error = extra;
      }
    } finally {
      ex.destroy();
    }
  } catch (e) {
    report.passed = false;
    report.error = `WebGPU failed: ${(e as Error).message ?? String(e)}`;
  }
  report.ms = (typeof performance !== 'undefined' ? performance.now() : Date.now()) - t0;
  return report;
}

// Runs every case (or those `filter` keeps) one after another; onResult sees each as it ends.
export async function runKernelChecks(
  backend: WebGPUBackend,
  reference: Reference,
  onResult?: (r: CaseResult) => void,
  opts: { filter?: (c: KernelCase) => boolean } = {},
): Promise<CaseResult[]> {
  const results: CaseResult[] = [];
  for (const c of kernelCases()) {
    if (opts.filter && !opts.filter(c)) continue;
    const r = await runKernelCase(backend, reference, c);
    results.push(r);
    onResult?.(r);
  }
  return results;
}

// Totals: a kernel passes when every case of it that ran passed; skipped cases count nowhere.
export function summariseChecks(results: CaseResult[]) {
  const ran = results.filter((r) => !r.skipped);
  const kernels = [...new Set(ran.map((r) => r.kernel))];
  return {
    cases_passed: ran.filter((r) => r.passed).length,
    cases_total: ran.length,
    cases_skipped: results.length - ran.length,
    kernels_total: kernels.length,
    kernels_passed: kernels.filter((k) => ran.filter((r) => r.kernel === k).every((r) => r.passed)).length,
  };
}

// One line per case, for logs and the page.
export function describeResult(r: CaseResult): string {
  if (r.skipped) return `skip ${r.case}: ${r.skipped}`;
  const outs = Object.entries(r.outputs)
    .map(([n, o]) => `${n}: abs ${o.max_abs.toExponential(2)} rel ${o.max_rel.toExponential(2)}`)
    .join('; ');
  return `${r.passed ? 'ok  ' : 'FAIL'} ${r.case} [atol ${r.atol}, rtol ${r.rtol}] ${outs}${r.error ? ` (${r.error})` : ''}`;
}
