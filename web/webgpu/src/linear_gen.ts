// linear_tiled: the matrix product of linear.wgsl (same Params, bindings, override constants and
// split-K layout; linear.wgsl's entry `reduce_split` finishes a split product), generated per
// configuration instead of written by hand, so that every register of the thread's block is a
// named variable and every loop over the tile is unrolled in the WGSL itself:
//
//   C[I,J] (+)= sum_p A(i,p) B(p,j) (+ bias[j]),  A and B each plain or transposed (TRANS_A/B):
//   forward  y  = x  W^T : I=M, J=N, P=K, A = x  (plain, lda=K), B = W  (transposed, ldb=K)
//   backward dx = dy W   : I=M, J=K, P=N, A = dy (plain, lda=N), B = W  (plain, ldb=K)
//   backward dW = dy^T x : I=N, J=K, P=M, A = dy (transposed, lda=N), B = x (plain, ldb=K)
//
// Configuration (`TiledConfig`, the pipeline's `defines`): a workgroup of NT = (BM/TM)(BN/TN)
// threads computes a BM x BN tile of C, each thread a TM x TN block: rows 4 (ty + WY r) + e and
// columns 4 (tx + WX c) + e (WY = BM/TM, WX = BN/TN, r < TM/4, c < TN/4, e < 4), so every read of
// the tiles in workgroup memory is a vec4 and the threads of one row read consecutive vec4s.
// P is walked in steps of BK. Both tiles are stored k-major (row k of the A tile holds A(i0..,
// k0+k)), each row padded by one vec4 so that the transposing scalar stores of k-contiguous
// operands hit distinct banks (PAD = 1; PAD = 0 saves the memory). Workgroup memory is declared
// as nested arrays `As[buffer][k].v[r][ty]`: in the unrolled inner loop the buffer, k and r are
// constants and ty is the one run-time index, so the bounds clamps that WebGPU's robustness adds
// reduce to one shared `min(ty, WY-1)` and the compiler can fold the rest into immediate offsets.
//
// The executor's default for large products is 128x128/8x8/k16/db0/tr1, the fastest configuration
// of those measured (docs/webgpu.md "Matrix products": the figures and the commands); the flags:
//   DB = 1: double-buffered (two halves of workgroup memory, the main loop unrolled twice so
//           that each half's index is a constant): while the threads multiply step s, the quads of
//           step s+1 are already in registers; one barrier per step. DB = 0: one buffer, two
//           barriers per step (half the workgroup memory).
//   MAP = 0: tx = t % WX, ty = t / WX.  MAP = 1: a subgroup of 32 consecutive invocations is a
//           block of 8 x 4 threads (fewer distinct addresses per vec4 read).
//   SW = 1: workgroups walk the output tiles in bands of 8 tile rows (L2 locality).
//   U2 = 0 (with DB = 1): the main loop not unrolled twice; the half in use is a pointer (smaller
//           code, one clamp per step).  PAD = 0: no padding vec4 per tile row.
//   TR = 1 (the executor's, not the kernel's): operands contiguous along P (x and W of the forward,
//           dy of dx) are first copied transposed (kernels/transpose.wgsl) into scratch buffers, so
//           that the kernel reads both operands along I / J (the layout of dW = dy^T x).
//   SG = 1 (needs the `subgroups` feature): the A fragment of a step comes from two scalar reads
//           per thread and subgroupShuffle among the 4 threads that share it, instead of TM/4
//           broadcast vec4 reads (MAP = 1, TM = 8; subgroups made of consecutive invocations, a
//           multiple of 4 in size).
// Global loads: per step each thread loads BM*BK/(4 NT) quads of A and BN*BK/(4 NT) of B. Where
// the whole step lies inside the matrices (ALIGNED_*, the tile's rows or columns inside, k0 + BK <=
// end) a quad is one vec4 load at an offset computed once per thread; elsewhere bounds-checked
// scalar loads (zeros outside), so any shape is correct.

export interface TiledConfig {
  BM: number;
  BN: number;
  TM: number;
  TN: number;
  BK: number;
  DB: number;
  MAP: number;
  SW: number;
  SG: number;
  PAD: number;
  U2: number;
  TR: number; // executor only: transpose k-contiguous operands first (kernels/transpose.wgsl)
}

export const TILED_DEFAULT: TiledConfig = {
  BM: 128,
  BN: 128,
  TM: 8,
  TN: 8,
  BK: 8,
  DB: 1,
  MAP: 0,
  SW: 0,
  SG: 0,
  PAD: 1,
  U2: 1,
  TR: 0,
};

// "128x128/8x8/k8" plus optional flags "/db0" "/map1" "/sw1" "/sg1" "/pad0" "/u0" "/tr1" (defaults: db1, map0, sw0, sg0, pad1, u1, tr0).
export function parseTiled(s: string): TiledConfig {
  const m = /^(\d+)x(\d+)\/(\d+)x(\d+)\/k(\d+)((?:\/(?:db|map|sw|sg|pad|u|tr)\d)*)$/.exec(s.trim());
  if (!m) throw new Error(`bad tiled matmul config '${s}' (expected e.g. 128x128/8x8/k8/map1)`);
  const c: TiledConfig = { ...TILED_DEFAULT, BM: +m[1]!, BN: +m[2]!, TM: +m[3]!, TN: +m[4]!, BK: +m[5]! };
  for (const f of (m[6] ?? '').split('/').filter(Boolean)) {
    const k = /^([a-z]+)(\d)$/.exec(f)!;
    (c as unknown as Record<string, number>)[k[1] === 'u' ? 'U2' : k[1]!.toUpperCase()] = +k[2]!;
  }
  checkTiled(c);
  return c;
}

export function tiledName(c: TiledConfig): string {
  return `${c.BM}x${c.BN}/${c.TM}x${c.TN}/k${c.BK}${c.DB ? '' : '/db0'}${c.MAP ? '/map1' : ''}${c.SW ? '/sw1' : ''}${c.SG ? '/sg1' : ''}${c.PAD ? '' : '/pad0'}${c.U2 || !c.DB ? '' : '/u0'}${c.TR ? '/tr1' : ''}`;
}

export function tiledThreads(c: TiledConfig): number {
  return (c.BM / c.TM) * (c.BN / c.TN);
}

// Workgroup memory in bytes.
export function tiledSmem(c: TiledConfig): number {
  return (c.DB ? 2 : 1) * c.BK * (c.BM + c.BN + (c.PAD ? 8 : 0)) * 4;
}

export function checkTiled(c: TiledConfig): void {
  const nt = tiledThreads(c);
  const bad = (why: string) => {
    throw new Error(`tiled matmul config ${tiledName(c)}: ${why}`);
  };
  if (c.TM % 4 || c.TN % 4 || c.TM < 4 || c.TN < 4) bad('TM, TN must be multiples of 4');
  if (c.BM % c.TM || c.BN % c.TN || c.BM % 16 || c.BN % 16) bad('BM, BN must be multiples of 16 and of TM, TN');
  if (c.BK % 8 || c.BK < 8) bad('BK must be a multiple of 8');
  if (nt % 32 || nt > 256) bad(`${nt} threads (a multiple of 32, at most 256)`);
  if (((c.BM * c.BK) / 4) % nt || ((c.BN * c.BK) / 4) % nt) bad('the tiles must have a multiple of NT quads');
  if (c.MAP && ((c.BN / c.TN) % 8 || (c.BM / c.TM) % 4)) bad('MAP 1 needs WX % 8 == 0, WY % 4 == 0');
  if (c.SG && (!c.MAP || c.TM !== 8)) bad('SG 1 needs MAP 1 and TM = 8');
}

export function tiledFromDefines(d: Record<string, number>): TiledConfig {
  const c = { ...TILED_DEFAULT };
  for (const k of Object.keys(c) as (keyof TiledConfig)[]) if (d[k] !== undefined) c[k] = d[k]!;
  checkTiled(c);
  return c;
}

export function tiledDefines(c: TiledConfig): Record<string, number> {
  return { ...c };
}

// The WGSL text of one configuration. Like the hand-written matmul kernels it takes its bindings
// and override flags from kernels/common/linear_interface.wgsl through `// #include`: expand it
// with sourceWithIncludes (kernels.ts) before compiling, as the executor does.
export function linearTiledSource(c: TiledConfig): string {
  checkTiled(c);
  const { BM, BN, TM, TN, BK, DB, MAP, SW, SG, PAD, U2 } = c;
  const NT = tiledThreads(c);
  const WX = BN / TN,
    WY = BM / TM,
    TM4 = TM / 4,
    TN4 = TN / 4;
  const NQA = (BM * BK) / 4 / NT,
    NQB = (BN * BK) / 4 / NT;
  const NB = DB ? 2 : 1;
  const L: string[] = [];
  const p = (s: string) => L.push(s);
  const X = 'xyzw';
  const range = (n: number) => Array.from({ length: n }, (_, i) => i);

  if (SG) p('enable subgroups;');
  p(`// linear_tiled ${tiledName(c)}: generated by web/webgpu/src/linear_gen.ts (see there).`);
  p(`// ${BM} x ${BN} tile, ${TM} x ${TN} per thread, ${NT} threads, BK ${BK}.`);
  p('// #include linear_interface');
  p(`
const BM: u32 = ${BM}u;
const BN: u32 = ${BN}u;
const BK: u32 = ${BK}u;
const WX: u32 = ${WX}u;
const WY: u32 = ${WY}u;
const NT: u32 = ${NT}u;
// One k-row of a tile: vec4 (r, ty) holds rows 4 (ty + WY r) .. +3 (plus one vec4 of padding, PAD = 1).
struct RowA { v: array<array<vec4<f32>, ${WY}>, ${TM4}>,${PAD ? ' pad: vec4<f32>,' : ''} }
struct RowB { v: array<array<vec4<f32>, ${WX}>, ${TN4}>,${PAD ? ' pad: vec4<f32>,' : ''} }
var<workgroup> As: array<array<RowA, ${BK}>, ${NB}>;  // [buffer][k]
var<workgroup> Bs: array<array<RowB, ${BK}>, ${NB}>;

fn elemA(i: u32, p: u32, pend: u32) -> f32 {
  if (i >= U.I || p >= pend) { return 0.0; }
  var idx: u32;
  if (TRANS_A) { idx = p * U.lda + i; } else { idx = i * U.lda + p; }
  return A[idx >> 2u][idx & 3u];
}
fn elemB(p: u32, j: u32, pend: u32) -> f32 {
  if (p >= pend || j >= U.J) { return 0.0; }
  var idx: u32;
  if (TRANS_B) { idx = j * U.ldb + p; } else { idx = p * U.ldb + j; }
  return B[idx >> 2u][idx & 3u];
}

// Quad q of a step's A tile: contiguous along i (TRANS_A: k = q / (BM/4), i = 4 (q % (BM/4))) or
// along k (16 rows x 2 quads per 32 consecutive q: rows i, quads kq of 4 k each).
fn quadRowA(q: u32) -> u32 {
  if (TRANS_A) { return 4u * (q % (BM / 4u)); }
  return (q % 16u) + 16u * ((q / 32u) % (BM / 16u));
}
fn quadKA(q: u32) -> u32 {
  if (TRANS_A) { return q / (BM / 4u); }
  return 4u * (2u * (q / (2u * BM)) + (q / 16u) % 2u);
}
fn quadColB(q: u32) -> u32 {
  if (!TRANS_B) { return 4u * (q % (BN / 4u)); }
  return (q % 16u) + 16u * ((q / 32u) % (BN / 16u));
}
fn quadKB(q: u32) -> u32 {
  if (!TRANS_B) { return q / (BN / 4u); }
  return 4u * (2u * (q / (2u * BN)) + (q / 16u) % 2u);
}
// Bounds-checked quad (zeros outside the matrix).
fn fetchA(q: u32, i0: u32, k0: u32, pend: u32) -> vec4<f32> {
  let gi = i0 + quadRowA(q);
  let gp = k0 + quadKA(q);
  if (TRANS_A) {
    if (ALIGNED_A && gi + 3u < U.I && gp < pend) { return A[(gp * U.lda + gi) >> 2u]; }
    return vec4<f32>(elemA(gi, gp, pend), elemA(gi + 1u, gp, pend), elemA(gi + 2u, gp, pend), elemA(gi + 3u, gp, pend));
  }
  if (ALIGNED_A && gi < U.I && gp + 3u < pend) { return A[(gi * U.lda + gp) >> 2u]; }
  return vec4<f32>(elemA(gi, gp, pend), elemA(gi, gp + 1u, pend), elemA(gi, gp + 2u, pend), elemA(gi, gp + 3u, pend));
}
fn fetchB(q: u32, j0: u32, k0: u32, pend: u32) -> vec4<f32> {
  let gj = j0 + quadColB(q);
  let gp = k0 + quadKB(q);
  if (!TRANS_B) {
    if (ALIGNED_B && gj + 3u < U.J && gp < pend) { return B[(gp * U.ldb + gj) >> 2u]; }
    return vec4<f32>(elemB(gp, gj, pend), elemB(gp, gj + 1u, pend), elemB(gp, gj + 2u, pend), elemB(gp, gj + 3u, pend));
  }
  if (ALIGNED_B && gj < U.J && gp + 3u < pend) { return B[(gj * U.ldb + gp) >> 2u]; }
  return vec4<f32>(elemB(gp, gj, pend), elemB(gp + 1u, gj, pend), elemB(gp + 2u, gj, pend), elemB(gp + 3u, gj, pend));
}
// Offset (in vec4s) of quad q at k0 = 0 for the unchecked path (ALIGNED: lda % 4 == 0).
fn offA(q: u32, i0: u32) -> u32 {
  let i = i0 + quadRowA(q);
  let k = quadKA(q);
  if (TRANS_A) { return (k * U.lda + i) >> 2u; }
  return (i * U.lda + k) >> 2u;
}
fn offB(q: u32, j0: u32) -> u32 {
  let j = j0 + quadColB(q);
  let k = quadKB(q);
  if (!TRANS_B) { return (k * U.ldb + j) >> 2u; }
  return (j * U.ldb + k) >> 2u;
}
fn storeA(b: u32, q: u32, v: vec4<f32>) {
  let i = quadRowA(q);
  let k = quadKA(q);
  let g = i / 4u;
  if (TRANS_A) {
    As[b][k].v[g / WY][g % WY] = v;
    return;
  }
  let e = i % 4u;
  As[b][k].v[g / WY][g % WY][e] = v.x;
  As[b][k + 1u].v[g / WY][g % WY][e] = v.y;
  As[b][k + 2u].v[g / WY][g % WY][e] = v.z;
  As[b][k + 3u].v[g / WY][g % WY][e] = v.w;
}
fn storeB(b: u32, q: u32, v: vec4<f32>) {
  let j = quadColB(q);
  let k = quadKB(q);
  let g = j / 4u;
  if (!TRANS_B) {
    Bs[b][k].v[g / WX][g % WX] = v;
    return;
  }
  let e = j % 4u;
  Bs[b][k].v[g / WX][g % WX][e] = v.x;
  Bs[b][k + 1u].v[g / WX][g % WX][e] = v.y;
  Bs[b][k + 2u].v[g / WX][g % WX][e] = v.z;
  Bs[b][k + 3u].v[g / WX][g % WX][e] = v.w;
}
// Row i, columns j .. j+3 of the result.
fn put4(i: u32, j: u32, v: vec4<f32>, z: u32) {
  if (i >= U.I) { return; }
  for (var e = 0u; e < 4u; e++) {
    let jj = j + e;
    if (jj >= U.J) { break; }
    var x = v[e];
    if (SPLIT) {
      C[(z * U.I + i) * U.J + jj] = x;
      continue;
    }
    if (HAS_BIAS) { x = x + bias[jj]; }
    let o = i * U.ldc + jj;
    if (ACC) { x = C[o] + x; }
    C[o] = x;
  }
}
`);
  const builtins = [
    '@builtin(workgroup_id) wid: vec3<u32>',
    '@builtin(local_invocation_index) t: u32',
    '@builtin(num_workgroups) nwg: vec3<u32>',
  ];
  if (SG) builtins.push('@builtin(subgroup_invocation_id) sgl: u32');
  p(`@compute @workgroup_size(${NT})`);
  p(`fn main(${builtins.join(', ')}) {`);
  if (MAP) {
    p(`  let lane = t % 32u;`);
    p(`  let w = t / 32u;`);
    p(`  let tx = (w % ${WX / 8}u) * 8u + lane % 8u;`);
    p(`  let ty = (w / ${WX / 8}u) * 4u + lane / 8u;`);
  } else {
    p(`  let tx = t % WX;`);
    p(`  let ty = t / WX;`);
  }
  if (SW) {
    // Bands of 8 tile rows walked column by column.
    p(`  let gx = nwg.x;`);
    p(`  let lin = wid.y * gx + wid.x;`);
    p(`  let band = lin / (8u * gx);`);
    p(`  let rows = min(nwg.y - band * 8u, 8u);`);
    p(`  let inb = lin % (8u * gx);`);
    p(`  let i0 = (band * 8u + inb % rows) * BM;`);
    p(`  let j0 = (inb / rows) * BN;`);
  } else {
    p(`  let i0 = wid.y * BM;`);
    p(`  let j0 = wid.x * BN;`);
  }
  // accumulators c{r}{e}_{c}: row 4 (ty + WY r) + e, columns 4 (tx + WX c) .. +3
  for (const r of range(TM4))
    for (const e of range(4))
      p(
        `  ${range(TN4)
          .map((cc) => `var c${r}${e}_${cc} = vec4<f32>(0.0);`)
          .join(' ')}`,
      );
  p(`  var kb = 0u;`);
  p(`  var ke = U.P;`);
  p(`  if (SPLIT) {`);
  p(`    kb = wid.z * U.pchunk;`);
  p(`    ke = min(U.P, kb + U.pchunk);`);
  p(`  }`);
  p(`  let fullA = ALIGNED_A && i0 + BM <= U.I;`);
  p(`  let fullB = ALIGNED_B && j0 + BN <= U.J;`);
  // vec4 offset of step k relative to k = 0: k/4 along a k-contiguous operand, k ld/4 otherwise.
  p(`  var kshA = 2u; var kmulA = 1u;`);
  p(`  if (TRANS_A) { kshA = 0u; kmulA = U.lda >> 2u; }`);
  p(`  var kshB = 2u; var kmulB = 1u;`);
  p(`  if (!TRANS_B) { kshB = 0u; kmulB = U.ldb >> 2u; }`);
  for (const s of range(NQA)) p(`  let oa${s} = offA(t + ${s * NT}u, i0);`);
  for (const s of range(NQB)) p(`  let ob${s} = offB(t + ${s * NT}u, j0);`);
  for (const s of range(NQA)) p(`  var pa${s} = vec4<f32>(0.0);`);
  for (const s of range(NQB)) p(`  var pb${s} = vec4<f32>(0.0);`);

  // Loads the quads of the step at k into pa*, pb* (the fast path where the whole step is inside).
  const fetch = (k: string, ind: string) => {
    p(`${ind}if (fullA && ${k} + BK <= ke) {`);
    p(`${ind}  let da = (${k} >> kshA) * kmulA;`);
    for (const s of range(NQA)) p(`${ind}  pa${s} = A[oa${s} + da];`);
    p(`${ind}} else {`);
    for (const s of range(NQA)) p(`${ind}  pa${s} = fetchA(t + ${s * NT}u, i0, ${k}, ke);`);
    p(`${ind}}`);
    p(`${ind}if (fullB && ${k} + BK <= ke) {`);
    p(`${ind}  let db = (${k} >> kshB) * kmulB;`);
    for (const s of range(NQB)) p(`${ind}  pb${s} = B[ob${s} + db];`);
    p(`${ind}} else {`);
    for (const s of range(NQB)) p(`${ind}  pb${s} = fetchB(t + ${s * NT}u, j0, ${k}, ke);`);
    p(`${ind}}`);
  };
  const store = (b: number | string, ind: string) => {
    const bb = typeof b === 'number' ? `${b}u` : b;
    for (const s of range(NQA)) p(`${ind}storeA(${bb}, t + ${s * NT}u, pa${s});`);
    for (const s of range(NQB)) p(`${ind}storeB(${bb}, t + ${s * NT}u, pb${s});`);
  };
  // b: a constant buffer (U2 = 1) or -1: the buffer `cur`, through pointers (one clamp per step).
  const compute = (b: number, ind: string) => {
    const ta = b >= 0 ? `As[${b}u]` : '(*tA)';
    const tb = b >= 0 ? `Bs[${b}u]` : '(*tB)';
    if (b < 0) p(`${ind}let tA = &As[cur];\n${ind}let tB = &Bs[cur];`);
    for (const k of range(BK)) {
      p(`${ind}{`);
      if (SG) {
        // The 4 threads sharing ty (consecutive lanes) read 2 values each and exchange them.
        p(`${ind}  let sa0 = ${ta}[${k}u].v[0][ty][sgl % 4u];`);
        p(`${ind}  let sa1 = ${ta}[${k}u].v[1][ty][sgl % 4u];`);
        p(`${ind}  let sb = sgl & ~3u;`);
        for (const r of range(TM4))
          p(
            `${ind}  let a${r} = vec4<f32>(${range(4)
              .map((e) => `subgroupShuffle(sa${r}, sb + ${e}u)`)
              .join(', ')});`,
          );
      } else for (const r of range(TM4)) p(`${ind}  let a${r} = ${ta}[${k}u].v[${r}][ty];`);
      for (const cc of range(TN4)) p(`${ind}  let b${cc} = ${tb}[${k}u].v[${cc}][tx];`);
      for (const r of range(TM4))
        for (const e of range(4))
          p(
            `${ind}  ${range(TN4)
              .map((cc) => `c${r}${e}_${cc} = fma(vec4<f32>(a${r}.${X[e]}), b${cc}, c${r}${e}_${cc});`)
              .join(' ')}`,
          );
      p(`${ind}}`);
    }
  };

  p(`  if (kb < ke) {`);
  fetch('kb', '    ');
  store(0, '    ');
  p(`  }`);
  p(`  workgroupBarrier();`);
  p(`  var k0 = kb;`);
  if (DB && !U2) p(`  var cur = 0u;`);
  p(`  loop {`);
  if (DB && U2) {
    for (const b of [0, 1]) {
      p(`    if (k0 >= ke) { break; }`);
      p(`    {`);
      p(`      let more = k0 + BK < ke;`);
      p(`      if (more) {`);
      fetch('(k0 + BK)', '        ');
      p(`      }`);
      compute(b, '      ');
      p(`      if (more) {`);
      store(1 - b, '        ');
      p(`      }`);
      p(`      workgroupBarrier();`);
      p(`      k0 += BK;`);
      p(`    }`);
    }
  } else if (DB) {
    p(`    if (k0 >= ke) { break; }`);
    p(`    let more = k0 + BK < ke;`);
    p(`    if (more) {`);
    fetch('(k0 + BK)', '      ');
    p(`    }`);
    compute(-1, '    ');
    p(`    if (more) {`);
    store('1u - cur', '      ');
    p(`    }`);
    p(`    workgroupBarrier();`);
    p(`    cur = 1u - cur;`);
    p(`    k0 += BK;`);
  } else {
    p(`    if (k0 >= ke) { break; }`);
    p(`    let more = k0 + BK < ke;`);
    p(`    if (more) {`);
    fetch('(k0 + BK)', '      ');
    p(`    }`);
    compute(0, '    ');
    p(`    workgroupBarrier();`);
    p(`    if (more) {`);
    store(0, '      ');
    p(`    }`);
    p(`    workgroupBarrier();`);
    p(`    k0 += BK;`);
  }
  p(`  }`);
  for (const r of range(TM4))
    for (const e of range(4))
      for (const cc of range(TN4))
        p(`  put4(i0 + 4u * (ty + ${WY * r}u) + ${e}u, j0 + 4u * (tx + ${WX * cc}u), c${r}${e}_${cc}, wid.z);`);
  p(`}`);
  return L.join('\n') + '\n';
}
