// transpose: Y[c * ldo + r] = X[r * ld + c] for r < R, c < C, and zeros for R <= r < ldo.
// Not an op of the engine: the executor runs it before a large matrix product (linear_tiled with
// TR, see Executor.matmul) to copy an operand that is contiguous along the reduction dimension
// (x and W of the forward, dy of dx) into one contiguous along the output's rows or columns. The
// product then reads only long contiguous rows from memory and stores them into workgroup memory
// as whole vec4s (the layout of dW = dy^T x, the fastest of the three; docs/webgpu.md "Matrix
// products" has the figures); the copy costs one pass over the operand.
// A workgroup of 32 x 8 threads moves a 32 x 32 block through workgroup memory (one padding column:
// no bank conflicts), reads coalesced along c and writes coalesced along r.
struct Params { R: u32, C: u32, ld: u32, ldo: u32 }
@group(0) @binding(0) var<uniform> U: Params;
@group(0) @binding(1) var<storage, read> X: array<f32>;
@group(0) @binding(2) var<storage, read_write> Y: array<f32>;

var<workgroup> tile: array<array<f32, 33>, 32>;

@compute @workgroup_size(32, 8)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
  let c0 = wid.x * 32u;
  let r0 = wid.y * 32u;
  for (var k = 0u; k < 32u; k += 8u) {
    let r = r0 + lid.y + k;
    let c = c0 + lid.x;
    var v = 0.0;
    if (r < U.R && c < U.C) { v = X[r * U.ld + c]; }
    tile[lid.y + k][lid.x] = v;
  }
  workgroupBarrier();
  for (var k = 0u; k < 32u; k += 8u) {
    let c = c0 + lid.y + k;
    let r = r0 + lid.x;
    if (c < U.C && r < U.ldo) { Y[c * U.ldo + r] = tile[lid.x][lid.y + k]; }
  }
}
