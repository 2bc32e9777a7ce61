// linear_wide: the large-tile variant of linear.wgsl's product  C[I,J] (+)= sum_p A(i,p) B(p,j) (+ bias[j])
// (same Params, bindings, override constants and split-K layout as linear.wgsl, whose entry
// `reduce_split` finishes a split product; the executor picks this kernel for products with
// enough 128 x 128 output tiles to fill the GPU, see Executor.matmul).
//
//   forward  y  = x  W^T : I=M, J=N, P=K, A = x  (plain, lda=K), B = W  (transposed, ldb=K)
//   backward dx = dy W   : I=M, J=K, P=N, A = dy (plain, lda=N), B = W  (plain, ldb=K)
//   backward dW = dy^T x : I=N, J=K, P=M, A = dy (transposed, lda=N), B = x (plain, ldb=K)
//
// Tiling: a workgroup of 16 x 16 threads computes a 128 x 128 tile of C; each thread owns an
// 8 x 8 block: rows ty*4 + {0..3} and 64 + ty*4 + {0..3}, columns tx*4 + {0..3} and
// 64 + tx*4 + {0..3}, so that per k it reads 2 vec4 of A and 2 vec4 of B from workgroup memory
// (the 16 threads of a row read consecutive vec4s, threads of a column read the same one) for
// 64 multiply-adds. The 64 accumulators are 16 named vec4 variables, not an array, so that no
// compiler has to prove constant indices to keep them in registers (an array it cannot prove
// so spills to memory, and every multiply-add then waits on a load).
// P is walked in steps of BK (8 or 16, replaced by the executor). Double buffering: while the
// threads multiply the tiles of step s out of one half of workgroup memory, they have already
// loaded the quads of step s+1 from global memory into registers, and store them into the other
// half afterwards: one barrier per step, and the global loads' latency hides behind the FMAs.
// Global loads: each thread fetches BK/8 quads (4 consecutive floats in memory) of A and of B per
// step, one vec4 load where the leading dimension is a multiple of 4 (ALIGNED_*) and the quad is
// inside the matrix, bounds-checked scalar loads (zeros outside) elsewhere, so any shape is
// correct. Quads contiguous along p are transposed into the k-major tile on the store.
// #include linear_interface

const BK: u32 = 8u;               // depth of a step: 8 or 16 (replaced by the executor)
const TILE: u32 = 128u;           // BM = BN
const Q4: u32 = TILE / 4u;        // vec4 columns of a k-row of a tile (32)
const HALF: u32 = BK * Q4;        // vec4s of one buffer
var<workgroup> As: array<vec4<f32>, 2u * BK * Q4>;  // [2][BK][32]: As[b][k][i/4][i%4] = A(i0+i, k0+k)
var<workgroup> Bs: array<vec4<f32>, 2u * BK * Q4>;  // [2][BK][32]

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

// Quad q (0 .. 32*BK) of the A tile at (i0, k0).
fn fetchA(q: u32, i0: u32, k0: u32, pend: u32) -> vec4<f32> {
  if (TRANS_A) {
    let gp = k0 + q / Q4;
    let gi = i0 + 4u * (q % Q4);
    if (ALIGNED_A && gi + 3u < U.I && gp < pend) { return A[(gp * U.lda + gi) >> 2u]; }
    return vec4<f32>(elemA(gi, gp, pend), elemA(gi + 1u, gp, pend), elemA(gi + 2u, gp, pend), elemA(gi + 3u, gp, pend));
  }
  let gi = i0 + q / (BK / 4u);
  let gp = k0 + 4u * (q % (BK / 4u));
  if (ALIGNED_A && gi < U.I && gp + 3u < pend) { return A[(gi * U.lda + gp) >> 2u]; }
  return vec4<f32>(elemA(gi, gp, pend), elemA(gi, gp + 1u, pend), elemA(gi, gp + 2u, pend), elemA(gi, gp + 3u, pend));
}
fn putA(base: u32, q: u32, v: vec4<f32>) {
  if (TRANS_A) {
    As[base + q] = v;  // q = k * 32 + i/4
    return;
  }
  let i = q / (BK / 4u);
  let k = 4u * (q % (BK / 4u));
  let o = base + k * Q4 + i / 4u;
  let lane = i % 4u;
  As[o][lane] = v.x;
  As[o + Q4][lane] = v.y;
  As[o + 2u * Q4][lane] = v.z;
  As[o + 3u * Q4][lane] = v.w;
}
fn fetchB(q: u32, j0: u32, k0: u32, pend: u32) -> vec4<f32> {
  if (TRANS_B) {
    let gj = j0 + q / (BK / 4u);
    let gp = k0 + 4u * (q % (BK / 4u));
    if (ALIGNED_B && gj < U.J && gp + 3u < pend) { return B[(gj * U.ldb + gp) >> 2u]; }
    return vec4<f32>(elemB(gp, gj, pend), elemB(gp + 1u, gj, pend), elemB(gp + 2u, gj, pend), elemB(gp + 3u, gj, pend));
  }
  let gp = k0 + q / Q4;
  let gj = j0 + 4u * (q % Q4);
  if (ALIGNED_B && gj + 3u < U.J && gp < pend) { return B[(gp * U.ldb + gj) >> 2u]; }
  return vec4<f32>(elemB(gp, gj, pend), elemB(gp, gj + 1u, pend), elemB(gp, gj + 2u, pend), elemB(gp, gj + 3u, pend));
}
fn putB(base: u32, q: u32, v: vec4<f32>) {
  if (!TRANS_B) {
    Bs[base + q] = v;
    return;
  }
  let j = q / (BK / 4u);
  let k = 4u * (q % (BK / 4u));
  let o = base + k * Q4 + j / 4u;
  let lane = j % 4u;
  Bs[o][lane] = v.x;
  Bs[o + Q4][lane] = v.y;
  Bs[o + 2u * Q4][lane] = v.z;
  Bs[o + 3u * Q4][lane] = v.w;
}

// Row i, columns j .. j+3 and j+64 .. j+67 of the result.
fn put(i: u32, j: u32, v0: vec4<f32>, v1: vec4<f32>, z: u32) {
  if (i >= U.I) { return; }
  for (var h = 0u; h < 2u; h++) {
    var v4 = v0;
    if (h == 1u) { v4 = v1; }
    for (var c = 0u; c < 4u; c++) {
      let jj = j + h * 64u + c;
      if (jj >= U.J) { continue; }
      var v = v4[c];
      if (SPLIT) {
        C[(z * U.I + i) * U.J + jj] = v;
        continue;
      }
      if (HAS_BIAS) { v = v + bias[jj]; }
      let o = i * U.ldc + jj;
      if (ACC) { v = C[o] + v; }
      C[o] = v;
    }
  }
}

@compute @workgroup_size(16, 16)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid3: vec3<u32>) {
  let tx = lid3.x;
  let ty = lid3.y;
  let t = ty * 16u + tx;
  let i0 = wid.y * TILE;
  let j0 = wid.x * TILE;
  var c00 = vec4<f32>(0.0); var c01 = vec4<f32>(0.0); var c10 = vec4<f32>(0.0); var c11 = vec4<f32>(0.0);
  var c20 = vec4<f32>(0.0); var c21 = vec4<f32>(0.0); var c30 = vec4<f32>(0.0); var c31 = vec4<f32>(0.0);
  var c40 = vec4<f32>(0.0); var c41 = vec4<f32>(0.0); var c50 = vec4<f32>(0.0); var c51 = vec4<f32>(0.0);
  var c60 = vec4<f32>(0.0); var c61 = vec4<f32>(0.0); var c70 = vec4<f32>(0.0); var c71 = vec4<f32>(0.0);

  var kb = 0u;
  var ke = U.P;
  if (SPLIT) {
    kb = wid.z * U.pchunk;
    ke = min(U.P, kb + U.pchunk);
  }
  // Prefetch registers: quads t and t + 256 (the second only when BK = 16).
  var pa0 = vec4<f32>(0.0); var pa1 = vec4<f32>(0.0);
  var pb0 = vec4<f32>(0.0); var pb1 = vec4<f32>(0.0);
  if (kb < ke) {
    pa0 = fetchA(t, i0, kb, ke);
    pb0 = fetchB(t, j0, kb, ke);
    if (BK == 16u) { pa1 = fetchA(t + 256u, i0, kb, ke); pb1 = fetchB(t + 256u, j0, kb, ke); }
    putA(0u, t, pa0);
    putB(0u, t, pb0);
    if (BK == 16u) { putA(0u, t + 256u, pa1); putB(0u, t + 256u, pb1); }
  }
  workgroupBarrier();

  var cur = 0u;
  for (var k0 = kb; k0 < ke; k0 += BK) {
    let more = k0 + BK < ke;
    if (more) {
      pa0 = fetchA(t, i0, k0 + BK, ke);
      pb0 = fetchB(t, j0, k0 + BK, ke);
      if (BK == 16u) { pa1 = fetchA(t + 256u, i0, k0 + BK, ke); pb1 = fetchB(t + 256u, j0, k0 + BK, ke); }
    }
    let base = cur * HALF;
    for (var k = 0u; k < BK; k++) {
      let o = base + k * Q4;
      let a0 = As[o + ty];
      let a1 = As[o + 16u + ty];
      let b0 = Bs[o + tx];
      let b1 = Bs[o + 16u + tx];
      c00 = fma(vec4<f32>(a0.x), b0, c00); c01 = fma(vec4<f32>(a0.x), b1, c01);
      c10 = fma(vec4<f32>(a0.y), b0, c10); c11 = fma(vec4<f32>(a0.y), b1, c11);
      c20 = fma(vec4<f32>(a0.z), b0, c20); c21 = fma(vec4<f32>(a0.z), b1, c21);
      c30 = fma(vec4<f32>(a0.w), b0, c30); c31 = fma(vec4<f32>(a0.w), b1, c31);
      c40 = fma(vec4<f32>(a1.x), b0, c40); c41 = fma(vec4<f32>(a1.x), b1, c41);
      c50 = fma(vec4<f32>(a1.y), b0, c50); c51 = fma(vec4<f32>(a1.y), b1, c51);
      c60 = fma(vec4<f32>(a1.z), b0, c60); c61 = fma(vec4<f32>(a1.z), b1, c61);
      c70 = fma(vec4<f32>(a1.w), b0, c70); c71 = fma(vec4<f32>(a1.w), b1, c71);
    }
    if (more) {
      let nb = (1u - cur) * HALF;
      putA(nb, t, pa0);
      putB(nb, t, pb0);
      if (BK == 16u) { putA(nb, t + 256u, pa1); putB(nb, t + 256u, pb1); }
    }
    workgroupBarrier();
    cur = 1u - cur;
  }

  let jb = j0 + tx * 4u;
  let ib = i0 + ty * 4u;
  put(ib, jb, c00, c01, wid.z);
  put(ib + 1u, jb, c10, c11, wid.z);
  put(ib + 2u, jb, c20, c21, wid.z);
  put(ib + 3u, jb, c30, c31, wid.z);
  put(ib + 64u, jb, c40, c41, wid.z);
  put(ib + 65u, jb, c50, c51, wid.z);
  put(ib + 66u, jb, c60, c61, wid.z);
  put(ib + 67u, jb, c70, c71, wid.z);
}
