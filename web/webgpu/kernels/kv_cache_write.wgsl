// kv_cache_write: k_cache[pos0 + i, :] = k[i, :], v_cache[pos0 + i, :] = v[i, :] for the n rows
// of this run (C++ twin: kv_cache_write in kernels/attention.cpp). The caches [ctx, C] are
// persistent state tensors, written in place; rows outside pos0 .. pos0 + n - 1 are untouched.
// pos0 + n <= ctx is checked on the host when pos0 is uploaded. One thread per element of k.
struct Params { n: u32, _pad0: u32, _pad1: u32, _pad2: u32 }  // n = rows * C
@group(0) @binding(0) var<uniform> U: Params;
@group(0) @binding(1) var<storage, read> k: array<f32>;
@group(0) @binding(2) var<storage, read> v: array<f32>;
@group(0) @binding(3) var<storage, read> pos0: array<i32>;
@group(0) @binding(4) var<storage, read_write> k_cache: array<f32>;
@group(0) @binding(5) var<storage, read_write> v_cache: array<f32>;

override C: u32 = 1u;  // row width

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let i = (wid.y * nwg.x + wid.x) * 256u + lid;
  if (i >= U.n) { return; }
  let dst = u32(pos0[0]) * C + i;
  k_cache[dst] = k[i];
  v_cache[dst] = v[i];
}
