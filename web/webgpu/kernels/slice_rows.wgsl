// slice_rows: y[i, :] = x[first + i, :] for the rows of y, rows of C floats (C++ twin:
// kernels/slice_rows.cpp). Generation over a prompt keeps only the last position's features
// for the final LayerNorm and the output projection. One thread per element of y.
struct Params { n: u32, offset: u32, _pad1: u32, _pad2: u32 }  // n = y's elements, offset = first * C
@group(0) @binding(0) var<uniform> U: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let i = (wid.y * nwg.x + wid.x) * 256u + lid;
  if (i >= U.n) { return; }
  y[i] = x[U.offset + i];
}
