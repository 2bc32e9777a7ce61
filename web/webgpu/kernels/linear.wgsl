// linear: y[M,N] = x[M,K] W[N,K]^T + b[N]   (C++ twin: engine/backends/cpu/kernels/linear.cpp)
//
// One tiled matrix product serves all three products of a Linear layer:
//   C[I,J] (+)= sum_p A(i,p) B(p,j)  (+ bias[j])
// with A and B each read either "plain" or "transposed" (override constants), so that
//   forward  y  = x  W^T : I=M, J=N, P=K, A = x  (plain, lda=K), B = W  (transposed, ldb=K)
//   backward dx = dy W   : I=M, J=K, P=N, A = dy (plain, lda=N), B = W  (plain, ldb=K)
//   backward dW = dy^T x : I=N, J=K, P=M, A = dy (transposed, lda=N), B = x (plain, ldb=K)
// (linear_backward.wgsl has the bias gradient; the executor runs this kernel for dx and dW.)
//
// Tiling: a workgroup of 16 x 16 threads computes a BM x BN tile of C (BM = 16 TM, BN = 16 TN);
// each thread owns a TM x TN register block (the executor uses TM = TN = 4, 64 x 64 tiles; large
// products go to linear_tiled / linear_nt.wgsl / linear_wide.wgsl, whose 8 x 8 blocks are named
// variables: an array block this size is not reliably kept in registers). Its rows are
// groups of 4 consecutive rows 64 apart (ty*4 + 64 g + r), likewise its columns, so that every
// read of the tiles in workgroup memory is a vec4 (TM/4 + TN/4 vec4 reads per TM x TN
// multiply-adds) and the 16 threads of a row read consecutive vec4s.
// Split-K (SPLIT): a product with few output tiles and a long P (the weight gradient
// dW = dy^T x has P = B*T) cannot fill the GPU, so P is cut into chunks of U.pchunk: workgroup z
// computes the partial product over its chunk into slice z of a scratch buffer (bound as C,
// [S][I][J]), and entry `reduce_split` adds the S slices in a fixed order (deterministic, no
// atomics), then the bias and the acc flag apply.
// P is walked in steps of BK = 16: the threads load the A and B tiles as quads (4 consecutive
// floats in memory). Where the leading dimension is a multiple of 4 (ALIGNED_*) a quad that lies
// inside the matrix is one vec4 load; ragged edges use bounds-checked scalar loads (zeros
// outside), so any shape is correct.
// #include linear_interface

const TM: u32 = 4u;  // rows per thread: 4 or 8 (replaced by the executor)
const TN: u32 = 4u;  // columns per thread: 4 or 8 (replaced by the executor)
const BM: u32 = 16u * TM;
const BN: u32 = 16u * TN;
const BK: u32 = 16u;
const GM: u32 = TM / 4u;  // vec4 groups per thread
const GN: u32 = TN / 4u;
var<workgroup> As: array<vec4<f32>, BK * BM / 4u>;  // [BK][BM/4]: As[k][i/4][i%4] = A(i0+i, k0+k)
var<workgroup> Bs: array<vec4<f32>, BK * BN / 4u>;  // [BK][BN/4]

fn loadA(i: u32, p: u32, pend: u32) -> f32 {
  if (i >= U.I || p >= pend) { return 0.0; }
  var idx: u32;
  if (TRANS_A) { idx = p * U.lda + i; } else { idx = i * U.lda + p; }
  return A[idx >> 2u][idx & 3u];
}
fn loadB(p: u32, j: u32, pend: u32) -> f32 {
  if (p >= pend || j >= U.J) { return 0.0; }
  var idx: u32;
  if (TRANS_B) { idx = j * U.ldb + p; } else { idx = p * U.ldb + j; }
  return B[idx >> 2u][idx & 3u];
}

// Quads of the A tile (BM x BK): 4 consecutive values along the contiguous dimension.
fn loadTileA(t: u32, i0: u32, k0: u32, pend: u32) {
  for (var q = t; q < BM * BK / 4u; q += 256u) {
    if (TRANS_A) {
      // contiguous along i: quad = A(i..i+3, k)
      let k = q / (BM / 4u);
      let i = 4u * (q % (BM / 4u));
      let gi = i0 + i;
      let gp = k0 + k;
      var v: vec4<f32>;
      if (ALIGNED_A && gi + 3u < U.I && gp < pend) {
        v = A[(gp * U.lda + gi) >> 2u];
      } else {
        v = vec4<f32>(loadA(gi, gp, pend), loadA(gi + 1u, gp, pend), loadA(gi + 2u, gp, pend), loadA(gi + 3u, gp, pend));
      }
      As[k * (BM / 4u) + i / 4u] = v;
    } else {
      // contiguous along p: quad = A(i, k..k+3)
      let i = q / (BK / 4u);
      let k = 4u * (q % (BK / 4u));
      let gi = i0 + i;
      let gp = k0 + k;
      var v: vec4<f32>;
      if (ALIGNED_A && gi < U.I && gp + 3u < pend) {
        v = A[(gi * U.lda + gp) >> 2u];
      } else {
        v = vec4<f32>(loadA(gi, gp, pend), loadA(gi, gp + 1u, pend), loadA(gi, gp + 2u, pend), loadA(gi, gp + 3u, pend));
      }
      let col = i / 4u;
      let lane = i % 4u;
      As[k * (BM / 4u) + col][lane] = v.x;
      As[(k + 1u) * (BM / 4u) + col][lane] = v.y;
      As[(k + 2u) * (BM / 4u) + col][lane] = v.z;
      As[(k + 3u) * (BM / 4u) + col][lane] = v.w;
    }
  }
}

fn loadTileB(t: u32, j0: u32, k0: u32, pend: u32) {
  for (var q = t; q < BN * BK / 4u; q += 256u) {
    if (TRANS_B) {
      // contiguous along p: quad = B(k..k+3, j)
      let j = q / (BK / 4u);
      let k = 4u * (q % (BK / 4u));
      let gj = j0 + j;
      let gp = k0 + k;
      var v: vec4<f32>;
      if (ALIGNED_B && gj < U.J && gp + 3u < pend) {
        v = B[(gj * U.ldb + gp) >> 2u];
      } else {
        v = vec4<f32>(loadB(gp, gj, pend), loadB(gp + 1u, gj, pend), loadB(gp + 2u, gj, pend), loadB(gp + 3u, gj, pend));
      }
      let col = j / 4u;
      let lane = j % 4u;
      Bs[k * (BN / 4u) + col][lane] = v.x;
      Bs[(k + 1u) * (BN / 4u) + col][lane] = v.y;
      Bs[(k + 2u) * (BN / 4u) + col][lane] = v.z;
      Bs[(k + 3u) * (BN / 4u) + col][lane] = v.w;
    } else {
      // contiguous along j: quad = B(k, j..j+3)
      let k = q / (BN / 4u);
      let j = 4u * (q % (BN / 4u));
      let gj = j0 + j;
      let gp = k0 + k;
      var v: vec4<f32>;
      if (ALIGNED_B && gj + 3u < U.J && gp < pend) {
        v = B[(gp * U.ldb + gj) >> 2u];
      } else {
        v = vec4<f32>(loadB(gp, gj, pend), loadB(gp, gj + 1u, pend), loadB(gp, gj + 2u, pend), loadB(gp, gj + 3u, pend));
      }
      Bs[k * (BN / 4u) + j / 4u] = v;
    }
  }
}

@compute @workgroup_size(16, 16)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid3: vec3<u32>) {
  let tx = lid3.x;
  let ty = lid3.y;
  let t = ty * 16u + tx;
  let i0 = wid.y * BM;
  let j0 = wid.x * BN;
  // acc[r * GN + h] = C(rows of a-group r/4 lane r%4, the 4 columns of b-group h)
  var acc: array<vec4<f32>, TM * GN>;
  for (var e = 0u; e < TM * GN; e++) { acc[e] = vec4<f32>(0.0); }

  var kb = 0u;
  var ke = U.P;
  if (SPLIT) {
    kb = wid.z * U.pchunk;
    ke = min(U.P, kb + U.pchunk);
  }
  for (var k0 = kb; k0 < ke; k0 += BK) {
    loadTileA(t, i0, k0, ke);
    loadTileB(t, j0, k0, ke);
    workgroupBarrier();
    for (var k = 0u; k < BK; k++) {
      var a: array<vec4<f32>, GM>;
      var b: array<vec4<f32>, GN>;
      for (var g = 0u; g < GM; g++) { a[g] = As[k * (BM / 4u) + g * 16u + ty]; }
      for (var h = 0u; h < GN; h++) { b[h] = Bs[k * (BN / 4u) + h * 16u + tx]; }
      for (var g = 0u; g < GM; g++) {
        for (var r = 0u; r < 4u; r++) {
          let av = vec4<f32>(a[g][r]);
          for (var h = 0u; h < GN; h++) {
            let e = (g * 4u + r) * GN + h;
            acc[e] = fma(av, b[h], acc[e]);
          }
        }
      }
    }
    workgroupBarrier();
  }

  for (var g = 0u; g < GM; g++) {
    for (var r = 0u; r < 4u; r++) {
      let i = i0 + g * 64u + ty * 4u + r;
      if (i >= U.I) { continue; }
      for (var h = 0u; h < GN; h++) {
        let v4 = acc[(g * 4u + r) * GN + h];
        for (var c = 0u; c < 4u; c++) {
          let j = j0 + h * 64u + tx * 4u + c;
          if (j >= U.J) { continue; }
          var v = v4[c];
          if (SPLIT) {
            C[(wid.z * U.I + i) * U.J + j] = v;
            continue;
          }
          if (HAS_BIAS) { v = v + bias[j]; }
          let o = i * U.ldc + j;
          if (ACC) { v = C[o] + v; }
          C[o] = v;
        }
      }
    }
  }
}

// C[i, j] (+)= v (+ bias[j]): the epilogue of the entries that compute one element per thread.
fn store_one(i: u32, j: u32, sum: f32) {
  var v = sum;
  if (HAS_BIAS) { v = v + bias[j]; }
  let o = i * U.ldc + j;
  if (ACC) { v = C[o] + v; }
  C[o] = v;
}

// Split-K second pass: C[i, j] (+)= sum over z of partial[z][i][j] (+ bias[j]), z in order.
// Bindings: 3 = bias, 4 = C, 5 = the partial products.
@group(0) @binding(5) var<storage, read> partial: array<f32>;

@compute @workgroup_size(256)
fn reduce_split(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                @builtin(local_invocation_index) lid: u32) {
  let idx = (wid.y * nwg.x + wid.x) * 256u + lid;
  if (idx >= U.I * U.J) { return; }
  let i = idx / U.J;
  let j = idx % U.J;
  var v = 0.0;
  for (var z = 0u; z < U.splits; z++) { v += partial[z * U.I * U.J + idx]; }
  store_one(i, j, v);
}

// Few rows (I <= 4: the products of a generation step, one token): one thread per element of C,
// summing over p in order. The 64 x 64 tile of `main` would compute 64 rows to keep one, which
// for a 50,257-token vocabulary's logits is most of a step's time.
@compute @workgroup_size(256)
fn rows(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let idx = (wid.y * nwg.x + wid.x) * 256u + lid;
  if (idx >= U.I * U.J) { return; }
  let i = idx / U.J;
  let j = idx % U.J;
  var v = 0.0;
  for (var p = 0u; p < U.P; p++) { v += loadA(i, p, U.P) * loadB(p, j, U.P); }
  store_one(i, j, v);
}
