// linear_backward: dx[M,K] (+)= dy W ; dW[N,K] (+)= dy^T x ; db[N] (+)= column sums of dy.
// (C++ twin: linear_backward in engine/backends/cpu/kernels/linear.cpp)
//
// dx and dW are matrix products: the executor runs linear.wgsl's tiled product for them with
// the operand layouts listed there. This file is the bias gradient, a column sum over M rows,
// deterministic (fixed summation order, no atomics): a workgroup owns 32 columns; its 8 row lanes
// each sum every 8th row (coalesced reads along a row), then the lanes are added in a fixed tree.
struct Params { M: u32, N: u32, _pad0: u32, _pad1: u32 }
@group(0) @binding(0) var<uniform> U: Params;
@group(0) @binding(1) var<storage, read> dy: array<f32>;
@group(0) @binding(2) var<storage, read_write> db: array<f32>;

override ACC: bool = false;

const COLS: u32 = 32u;
const LANES: u32 = 8u;
var<workgroup> part: array<f32, 256>;  // [LANES][COLS]

@compute @workgroup_size(256)
fn bias_grad(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let c = lid % COLS;
  let lane = lid / COLS;
  let col = wid.x * COLS + c;
  var s = 0.0;
  if (col < U.N) {
    for (var r = lane; r < U.M; r += LANES) { s += dy[r * U.N + col]; }
  }
  part[lane * COLS + c] = s;
  workgroupBarrier();
  for (var h = LANES / 2u; h > 0u; h >>= 1u) {
    if (lane < h) { part[lane * COLS + c] += part[(lane + h) * COLS + c]; }
    workgroupBarrier();
  }
  if (lane == 0u && col < U.N) {
    var v = part[c];
    if (ACC) { v = db[col] + v; }
    db[col] = v;
  }
}
