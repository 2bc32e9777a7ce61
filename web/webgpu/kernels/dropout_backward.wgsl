// dropout_backward: dx (+)= dy * scale where the forward kept the element, 0 where it dropped it;
// the mask is regenerated from dropout.seed, never stored (C++ twin: dropout_backward in
// kernels/dropout.cpp). One thread per element.
struct Params { n: u32, threshold: u32, scale: f32, stream: u32 }
@group(0) @binding(0) var<uniform> U: Params;
@group(0) @binding(1) var<storage, read> dy: array<f32>;
@group(0) @binding(2) var<storage, read> seed: array<u32>;  // dropout.seed = {key, step}
@group(0) @binding(3) var<storage, read_write> dx: array<f32>;

override ACC: bool = false;

// #include dropout

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let i = (wid.y * nwg.x + wid.x) * 256u + lid;
  if (i >= U.n) { return; }
  let base = dropout_base(U.stream, seed[0], seed[1]);
  var g = 0.0;
  if (dropout_keep(base, i, U.threshold)) { g = dy[i] * U.scale; }
  if (ACC) { g = dx[i] + g; }
  dx[i] = g;
}
