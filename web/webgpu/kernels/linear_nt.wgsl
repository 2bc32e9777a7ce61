// linear_nt: the forward product y = x W^T (+ b) of large Linear layers, both operands read along
// their contiguous dimension (linear.wgsl's layout TRANS_A = false, TRANS_B = true); same Params,
// bindings and override constants as linear.wgsl (whose `reduce_split` finishes a split product).
//
// Why a separate kernel: in linear.wgsl / linear_wide.wgsl the k-contiguous quads of x and W are
// transposed into k-major tiles with four scalar stores each. Here the tiles stay k-contiguous:
// row i of the A tile is BK = 8 floats (2 vec4) plus one vec4 of padding (row stride 12 floats,
// so that 16 consecutive rows fall on distinct bank groups), and every global quad is one vec4
// store. A workgroup of 16 x 16 threads computes a 128 x 128 tile; a thread owns rows ty + 16 r
// and columns tx + 16 c (r, c = 0..7): per 4 values of k it reads 8 vec4 of B (its 8 columns)
// and 8 vec4 of A (its 8 rows; the 16 threads of a row read the same address) for 256
// multiply-adds, and its stores are coalesced across tx. The 64 accumulators are 16 named vec4
// (rows r, columns c = 0..3 and 4..7). Double-buffered like linear_wide.wgsl: the quads of step
// s+1 are loaded into registers while step s is multiplied, one barrier per step. Ragged edges:
// bounds-checked scalar loads (zeros outside the matrix), so any shape is correct.
// (Generated once from a short script; edit here.)
// #include linear_interface
// (TRANS_A must be false and TRANS_B true: the executor uses this kernel for x W^T only.)

const ROW: u32 = 3u;              // vec4s per tile row: 2 of data (BK = 8), 1 of padding
const HALF: u32 = 128u * ROW;     // vec4s of one buffer
var<workgroup> As: array<vec4<f32>, 2u * HALF>;  // [2][128 rows i][3]: As[b][i][k/4][k%4] = A(i0+i, k0+k)
var<workgroup> Bs: array<vec4<f32>, 2u * HALF>;  // [2][128 cols j][3]: Bs[b][j][k/4][k%4] = B(k0+k, j0+j) = W[j0+j][k0+k]

fn elemA(i: u32, p: u32, pend: u32) -> f32 {
  if (i >= U.I || p >= pend) { return 0.0; }
  let idx = i * U.lda + p;
  return A[idx >> 2u][idx & 3u];
}
fn elemB(p: u32, j: u32, pend: u32) -> f32 {
  if (p >= pend || j >= U.J) { return 0.0; }
  let idx = j * U.ldb + p;
  return B[idx >> 2u][idx & 3u];
}
// Quad t (0..255) of a tile: row t/2, k = 4 (t%2) .. +3.
fn fetchA(t: u32, i0: u32, k0: u32, pend: u32) -> vec4<f32> {
  let gi = i0 + t / 2u;
  let gp = k0 + 4u * (t % 2u);
  if (ALIGNED_A && gi < U.I && gp + 3u < pend) { return A[(gi * U.lda + gp) >> 2u]; }
  return vec4<f32>(elemA(gi, gp, pend), elemA(gi, gp + 1u, pend), elemA(gi, gp + 2u, pend), elemA(gi, gp + 3u, pend));
}
fn fetchB(t: u32, j0: u32, k0: u32, pend: u32) -> vec4<f32> {
  let gj = j0 + t / 2u;
  let gp = k0 + 4u * (t % 2u);
  if (ALIGNED_B && gj < U.J && gp + 3u < pend) { return B[(gj * U.ldb + gp) >> 2u]; }
  return vec4<f32>(elemB(gp, gj, pend), elemB(gp + 1u, gj, pend), elemB(gp + 2u, gj, pend), elemB(gp + 3u, gj, pend));
}

// Row i, columns j + 16 c (c = 0..7) of the result.
fn put(i: u32, j: u32, v0: vec4<f32>, v1: vec4<f32>) {
  if (i >= U.I) { return; }
  for (var c = 0u; c < 8u; c++) {
    let jj = j + 16u * c;
    if (jj >= U.J) { continue; }
    var v = v0[c & 3u];
    if (c >= 4u) { v = v1[c & 3u]; }
    if (SPLIT) {
      C[(wid_z * U.I + i) * U.J + jj] = v;
      continue;
    }
    if (HAS_BIAS) { v = v + bias[jj]; }
    let o = i * U.ldc + jj;
    if (ACC) { v = C[o] + v; }
    C[o] = v;
  }
}
var<private> wid_z: u32;

@compute @workgroup_size(16, 16)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid3: vec3<u32>) {
  let tx = lid3.x;
  let ty = lid3.y;
  let t = ty * 16u + tx;
  let i0 = wid.y * 128u;
  let j0 = wid.x * 128u;
  wid_z = wid.z;
  var c00 = vec4<f32>(0.0); var c01 = vec4<f32>(0.0);
  var c10 = vec4<f32>(0.0); var c11 = vec4<f32>(0.0);
  var c20 = vec4<f32>(0.0); var c21 = vec4<f32>(0.0);
  var c30 = vec4<f32>(0.0); var c31 = vec4<f32>(0.0);
  var c40 = vec4<f32>(0.0); var c41 = vec4<f32>(0.0);
  var c50 = vec4<f32>(0.0); var c51 = vec4<f32>(0.0);
  var c60 = vec4<f32>(0.0); var c61 = vec4<f32>(0.0);
  var c70 = vec4<f32>(0.0); var c71 = vec4<f32>(0.0);

  var kb = 0u;
  var ke = U.P;
  if (SPLIT) {
    kb = wid.z * U.pchunk;
    ke = min(U.P, kb + U.pchunk);
  }
  let st = (t / 2u) * ROW + t % 2u;  // where this thread's quad goes in a tile
  var pa = vec4<f32>(0.0);
  var pb = vec4<f32>(0.0);
  if (kb < ke) {
    As[st] = fetchA(t, i0, kb, ke);
    Bs[st] = fetchB(t, j0, kb, ke);
  }
  workgroupBarrier();

  var cur = 0u;
  for (var k0 = kb; k0 < ke; k0 += 8u) {
    let more = k0 + 8u < ke;
    if (more) {
      pa = fetchA(t, i0, k0 + 8u, ke);
      pb = fetchB(t, j0, k0 + 8u, ke);
    }
    let base = cur * HALF;
    for (var kk = 0u; kk < 2u; kk++) {
      let bb = base + tx * ROW + kk;
      let ab = base + ty * ROW + kk;
      let b0 = Bs[bb + 0u];
      let b1 = Bs[bb + 48u];
      let b2 = Bs[bb + 96u];
      let b3 = Bs[bb + 144u];
      let b4 = Bs[bb + 192u];
      let b5 = Bs[bb + 240u];
      let b6 = Bs[bb + 288u];
      let b7 = Bs[bb + 336u];
      var a: vec4<f32>;
      a = As[ab + 0u];
      c00 = fma(vec4<f32>(a.x), vec4<f32>(b0.x, b1.x, b2.x, b3.x), c00); c01 = fma(vec4<f32>(a.x), vec4<f32>(b4.x, b5.x, b6.x, b7.x), c01);
      c00 = fma(vec4<f32>(a.y), vec4<f32>(b0.y, b1.y, b2.y, b3.y), c00); c01 = fma(vec4<f32>(a.y), vec4<f32>(b4.y, b5.y, b6.y, b7.y), c01);
      c00 = fma(vec4<f32>(a.z), vec4<f32>(b0.z, b1.z, b2.z, b3.z), c00); c01 = fma(vec4<f32>(a.z), vec4<f32>(b4.z, b5.z, b6.z, b7.z), c01);
      c00 = fma(vec4<f32>(a.w), vec4<f32>(b0.w, b1.w, b2.w, b3.w), c00); c01 = fma(vec4<f32>(a.w), vec4<f32>(b4.w, b5.w, b6.w, b7.w), c01);
      a = As[ab + 48u];
      c10 = fma(vec4<f32>(a.x), vec4<f32>(b0.x, b1.x, b2.x, b3.x), c10); c11 = fma(vec4<f32>(a.x), vec4<f32>(b4.x, b5.x, b6.x, b7.x), c11);
      c10 = fma(vec4<f32>(a.y), vec4<f32>(b0.y, b1.y, b2.y, b3.y), c10); c11 = fma(vec4<f32>(a.y), vec4<f32>(b4.y, b5.y, b6.y, b7.y), c11);
      c10 = fma(vec4<f32>(a.z), vec4<f32>(b0.z, b1.z, b2.z, b3.z), c10); c11 = fma(vec4<f32>(a.z), vec4<f32>(b4.z, b5.z, b6.z, b7.z), c11);
      c10 = fma(vec4<f32>(a.w), vec4<f32>(b0.w, b1.w, b2.w, b3.w), c10); c11 = fma(vec4<f32>(a.w), vec4<f32>(b4.w, b5.w, b6.w, b7.w), c11);
      a = As[ab + 96u];
      c20 = fma(vec4<f32>(a.x), vec4<f32>(b0.x, b1.x, b2.x, b3.x), c20); c21 = fma(vec4<f32>(a.x), vec4<f32>(b4.x, b5.x, b6.x, b7.x), c21);
      c20 = fma(vec4<f32>(a.y), vec4<f32>(b0.y, b1.y, b2.y, b3.y), c20); c21 = fma(vec4<f32>(a.y), vec4<f32>(b4.y, b5.y, b6.y, b7.y), c21);
      c20 = fma(vec4<f32>(a.z), vec4<f32>(b0.z, b1.z, b2.z, b3.z), c20); c21 = fma(vec4<f32>(a.z), vec4<f32>(b4.z, b5.z, b6.z, b7.z), c21);
      c20 = fma(vec4<f32>(a.w), vec4<f32>(b0.w, b1.w, b2.w, b3.w), c20); c21 = fma(vec4<f32>(a.w), vec4<f32>(b4.w, b5.w, b6.w, b7.w), c21);
      a = As[ab + 144u];
      c30 = fma(vec4<f32>(a.x), vec4<f32>(b0.x, b1.x, b2.x, b3.x), c30); c31 = fma(vec4<f32>(a.x), vec4<f32>(b4.x, b5.x, b6.x, b7.x), c31);
      c30 = fma(vec4<f32>(a.y), vec4<f32>(b0.y, b1.y, b2.y, b3.y), c30); c31 = fma(vec4<f32>(a.y), vec4<f32>(b4.y, b5.y, b6.y, b7.y), c31);
      c30 = fma(vec4<f32>(a.z), vec4<f32>(b0.z, b1.z, b2.z, b3.z), c30); c31 = fma(vec4<f32>(a.z), vec4<f32>(b4.z, b5.z, b6.z, b7.z), c31);
      c30 = fma(vec4<f32>(a.w), vec4<f32>(b0.w, b1.w, b2.w, b3.w), c30); c31 = fma(vec4<f32>(a.w), vec4<f32>(b4.w, b5.w, b6.w, b7.w), c31);
      a = As[ab + 192u];
      c40 = fma(vec4<f32>(a.x), vec4<f32>(b0.x, b1.x, b2.x, b3.x), c40); c41 = fma(vec4<f32>(a.x), vec4<f32>(b4.x, b5.x, b6.x, b7.x), c41);
      c40 = fma(vec4<f32>(a.y), vec4<f32>(b0.y, b1.y, b2.y, b3.y), c40); c41 = fma(vec4<f32>(a.y), vec4<f32>(b4.y, b5.y, b6.y, b7.y), c41);
      c40 = fma(vec4<f32>(a.z), vec4<f32>(b0.z, b1.z, b2.z, b3.z), c40); c41 = fma(vec4<f32>(a.z), vec4<f32>(b4.z, b5.z, b6.z, b7.z), c41);
      c40 = fma(vec4<f32>(a.w), vec4<f32>(b0.w, b1.w, b2.w, b3.w), c40); c41 = fma(vec4<f32>(a.w), vec4<f32>(b4.w, b5.w, b6.w, b7.w), c41);
      a = As[ab + 240u];
      c50 = fma(vec4<f32>(a.x), vec4<f32>(b0.x, b1.x, b2.x, b3.x), c50); c51 = fma(vec4<f32>(a.x), vec4<f32>(b4.x, b5.x, b6.x, b7.x), c51);
      c50 = fma(vec4<f32>(a.y), vec4<f32>(b0.y, b1.y, b2.y, b3.y), c50); c51 = fma(vec4<f32>(a.y), vec4<f32>(b4.y, b5.y, b6.y, b7.y), c51);
      c50 = fma(vec4<f32>(a.z), vec4<f32>(b0.z, b1.z, b2.z, b3.z), c50); c51 = fma(vec4<f32>(a.z), vec4<f32>(b4.z, b5.z, b6.z, b7.z), c51);
      c50 = fma(vec4<f32>(a.w), vec4<f32>(b0.w, b1.w, b2.w, b3.w), c50); c51 = fma(vec4<f32>(a.w), vec4<f32>(b4.w, b5.w, b6.w, b7.w), c51);
      a = As[ab + 288u];
      c60 = fma(vec4<f32>(a.x), vec4<f32>(b0.x, b1.x, b2.x, b3.x), c60); c61 = fma(vec4<f32>(a.x), vec4<f32>(b4.x, b5.x, b6.x, b7.x), c61);
      c60 = fma(vec4<f32>(a.y), vec4<f32>(b0.y, b1.y, b2.y, b3.y), c60); c61 = fma(vec4<f32>(a.y), vec4<f32>(b4.y, b5.y, b6.y, b7.y), c61);
      c60 = fma(vec4<f32>(a.z), vec4<f32>(b0.z, b1.z, b2.z, b3.z), c60); c61 = fma(vec4<f32>(a.z), vec4<f32>(b4.z, b5.z, b6.z, b7.z), c61);
      c60 = fma(vec4<f32>(a.w), vec4<f32>(b0.w, b1.w, b2.w, b3.w), c60); c61 = fma(vec4<f32>(a.w), vec4<f32>(b4.w, b5.w, b6.w, b7.w), c61);
      a = As[ab + 336u];
      c70 = fma(vec4<f32>(a.x), vec4<f32>(b0.x, b1.x, b2.x, b3.x), c70); c71 = fma(vec4<f32>(a.x), vec4<f32>(b4.x, b5.x, b6.x, b7.x), c71);
      c70 = fma(vec4<f32>(a.y), vec4<f32>(b0.y, b1.y, b2.y, b3.y), c70); c71 = fma(vec4<f32>(a.y), vec4<f32>(b4.y, b5.y, b6.y, b7.y), c71);
      c70 = fma(vec4<f32>(a.z), vec4<f32>(b0.z, b1.z, b2.z, b3.z), c70); c71 = fma(vec4<f32>(a.z), vec4<f32>(b4.z, b5.z, b6.z, b7.z), c71);
      c70 = fma(vec4<f32>(a.w), vec4<f32>(b0.w, b1.w, b2.w, b3.w), c70); c71 = fma(vec4<f32>(a.w), vec4<f32>(b4.w, b5.w, b6.w, b7.w), c71);
    }
    if (more) {
      let nb = (1u - cur) * HALF;
      As[nb + st] = pa;
      Bs[nb + st] = pb;
    }
    workgroupBarrier();
    cur = 1u - cur;
  }

  put(i0 + ty + 0u, j0 + tx, c00, c01);
  put(i0 + ty + 16u, j0 + tx, c10, c11);
  put(i0 + ty + 32u, j0 + tx, c20, c21);
  put(i0 + ty + 48u, j0 + tx, c30, c31);
  put(i0 + ty + 64u, j0 + tx, c40, c41);
  put(i0 + ty + 80u, j0 + tx, c50, c51);
  put(i0 + ty + 96u, j0 + tx, c60, c61);
  put(i0 + ty + 112u, j0 + tx, c70, c71);
}
