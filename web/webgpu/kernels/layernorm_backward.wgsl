// layernorm_backward (C++ twin: kernels/layernorm.cpp). With xhat = (x - mean) * rstd, g = dy * w:
//   dx = rstd * (g - mean_c(g) - xhat * mean_c(g * xhat))     (entry point `dx`, one workgroup per row)
//   dw = sum over rows of dy * xhat,  db = sum over rows of dy (entry point `dwdb`, column sums)
// Every output honours its acc flag; the column sums run in a fixed order (no atomics). dx_main's
// row sums are the workgroup reductions of `// #include reduce` (the tree, or the subgroup variant
// where the executor resolves the include to common/reduce_subgroup.wgsl).
struct Params { N: u32, C: u32, _pad0: u32, _pad1: u32 }
@group(0) @binding(0) var<uniform> U: Params;
@group(0) @binding(1) var<storage, read> dy: array<f32>;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read> w: array<f32>;
@group(0) @binding(4) var<storage, read> mean: array<f32>;
@group(0) @binding(5) var<storage, read> rstd: array<f32>;
@group(0) @binding(6) var<storage, read_write> dx: array<f32>;
@group(0) @binding(7) var<storage, read_write> dw: array<f32>;
@group(0) @binding(8) var<storage, read_write> db: array<f32>;

override ACC_DX: bool = false;
override ACC_DW: bool = false;
override ACC_DB: bool = false;
override HAS_DW: bool = true;
override HAS_DB: bool = true;

const RED_WG: u32 = 256u;  // dx_main reduces over 64 threads; dwdb_main uses `red` (both variants have it) as [8][32]
// #include reduce

@compute @workgroup_size(64)
fn dx_main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
           @builtin(local_invocation_index) lid: u32) {
  let row = wid.y * nwg.x + wid.x;
  if (row >= U.N) { return; }
  let base = row * U.C;
  let m = mean[row];
  let s = rstd[row];
  var gs = 0.0;
  var gxs = 0.0;
  for (var c = lid; c < U.C; c += 64u) {
    let xhat = (x[base + c] - m) * s;
    let g = dy[base + c] * w[c];
    gs += g;
    gxs += g * xhat;
  }
  let g_mean = wg_sum(gs, lid, 64u) / f32(U.C);
  let gx_mean = wg_sum(gxs, lid, 64u) / f32(U.C);
  for (var c = lid; c < U.C; c += 64u) {
    let xhat = (x[base + c] - m) * s;
    var v = s * (dy[base + c] * w[c] - g_mean - xhat * gx_mean);
    if (ACC_DX) { v = dx[base + c] + v; }
    dx[base + c] = v;
  }
}

// Column sums: a workgroup owns 32 columns, 8 row lanes each sum every 8th row.
@compute @workgroup_size(256)
fn dwdb_main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let c = lid % 32u;
  let lane = lid / 32u;
  let col = wid.x * 32u + c;
  var sw = 0.0;
  var sb = 0.0;
  if (col < U.C) {
    for (var r = lane; r < U.N; r += 8u) {
      let d = dy[r * U.C + col];
      sw += d * ((x[r * U.C + col] - mean[r]) * rstd[r]);
      sb += d;
    }
  }
  // two [8][32] halves of red: dw in [0,256) would overflow, so do them one after the other
  red[lane * 32u + c] = sw;
  workgroupBarrier();
  for (var h = 4u; h > 0u; h >>= 1u) {
    if (lane < h) { red[lane * 32u + c] += red[(lane + h) * 32u + c]; }
    workgroupBarrier();
  }
  let tw = red[c];
  workgroupBarrier();
  red[lane * 32u + c] = sb;
  workgroupBarrier();
  for (var h = 4u; h > 0u; h >>= 1u) {
    if (lane < h) { red[lane * 32u + c] += red[(lane + h) * 32u + c]; }
    workgroupBarrier();
  }
  let tb = red[c];
  if (lane == 0u && col < U.C) {
    if (HAS_DW) { var v = tw; if (ACC_DW) { v = dw[col] + v; } dw[col] = v; }
    if (HAS_DB) { var v = tb; if (ACC_DB) { v = db[col] + v; } db[col] = v; }
  }
}
