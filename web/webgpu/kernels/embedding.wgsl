// embedding: x[b,t,:] = tok_emb[tokens[b,t], :] + pos_emb[pos0 + t, :]   (C++ twin: kernels/embedding.cpp)
// One thread per output element. pos0 is an optional i32 input (generation); 0 when absent.
// Token ids are checked on the host when they are uploaded.
struct Params { n: u32, T: u32, C: u32, _pad: u32 }
@group(0) @binding(0) var<uniform> U: Params;
@group(0) @binding(1) var<storage, read> tokens: array<i32>;
@group(0) @binding(2) var<storage, read> tok_emb: array<f32>;
@group(0) @binding(3) var<storage, read> pos_emb: array<f32>;
@group(0) @binding(4) var<storage, read> pos0: array<i32>;
@group(0) @binding(5) var<storage, read_write> x: array<f32>;

override HAS_POS0: bool = false;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let idx = (wid.y * nwg.x + wid.x) * 256u + lid;
  if (idx >= U.n) { return; }
  let c = idx % U.C;
  let bt = idx / U.C;
  let t = bt % U.T;
  var p0 = 0u;
  if (HAS_POS0) { p0 = u32(pos0[0]); }
  let tok = u32(tokens[bt]);
  x[idx] = tok_emb[tok * U.C + c] + pos_emb[(p0 + t) * U.C + c];
}
