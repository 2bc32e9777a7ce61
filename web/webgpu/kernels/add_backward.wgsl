// add_backward: da (+)= dy, db (+)= alpha * dy   (C++ twin: add_backward in kernels/add.cpp).
// Either output may be absent (HAS_DA / HAS_DB); one thread per element.
struct Params { n: u32, alpha: f32, _pad0: u32, _pad1: u32 }
@group(0) @binding(0) var<uniform> U: Params;
@group(0) @binding(1) var<storage, read> dy: array<f32>;
@group(0) @binding(2) var<storage, read_write> da: array<f32>;
@group(0) @binding(3) var<storage, read_write> db: array<f32>;

override HAS_DA: bool = true;
override HAS_DB: bool = true;
override ACC_A: bool = false;
override ACC_B: bool = false;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let i = (wid.y * nwg.x + wid.x) * 256u + lid;
  if (i >= U.n) { return; }
  let g = dy[i];
  if (HAS_DA) { var v = g; if (ACC_A) { v = da[i] + v; } da[i] = v; }
  if (HAS_DB) { var v = U.alpha * g; if (ACC_B) { v = db[i] + v; } db[i] = v; }
}
