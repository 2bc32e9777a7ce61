// adamw: one AdamW step with the global-norm clipping folded in, in the operation order of
// engine/backends/cpu/kernels/adamw.cpp (itself PyTorch's torch.optim.AdamW, foreach=False):
//   scale = min(1, max_norm / (norm + 1e-6)),  g' = g * scale
//   p *= decay;  m = fma(1 - b1, g' - m, m);  v = v * b2 + (1 - b2) g'^2
//   p = p + neg_step * m / (sqrt(v) / bc2_sqrt + eps)
// The step's scalars (decay = 1 - lr wd, neg_step = -lr / (1 - b1^t), bc2_sqrt = sqrt(1 - b2^t),
// ...) depend only on lr, the step and the op's attributes: the executor computes them in double
// precision on the host, exactly as the C++ does, each time optim.hparams = [lr, step] is set,
// and uploads them to `consts` (8 floats per distinct attribute set, selected by U.group).
struct Params { n: u32, group: u32, _pad0: u32, _pad1: u32 }
@group(0) @binding(0) var<uniform> U: Params;
@group(0) @binding(1) var<storage, read> consts: array<f32>;
@group(0) @binding(2) var<storage, read> norm: array<f32>;
@group(0) @binding(3) var<storage, read_write> p: array<f32>;
@group(0) @binding(4) var<storage, read> g: array<f32>;
@group(0) @binding(5) var<storage, read_write> m: array<f32>;
@group(0) @binding(6) var<storage, read_write> v: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let i = (wid.y * nwg.x + wid.x) * 256u + lid;
  if (i >= U.n) { return; }
  let o = U.group * 8u;
  let decay = consts[o];
  let one_minus_b1 = consts[o + 1u];
  let b2 = consts[o + 2u];
  let one_minus_b2 = consts[o + 3u];
  let neg_step = consts[o + 4u];
  let bc2_sqrt = consts[o + 5u];
  let eps = consts[o + 6u];
  let max_norm = consts[o + 7u];
  let scale = min(1.0, max_norm / (norm[0] + 1.0e-6));
  let gi = g[i] * scale;
  var pi = p[i] * decay;
  let mi = fma(one_minus_b1, gi - m[i], m[i]);
  let vi = v[i] * b2 + one_minus_b2 * gi * gi;
  m[i] = mi;
  v[i] = vi;
  let denom = sqrt(vi) / bc2_sqrt + eps;
  p[i] = pi + neg_step * mi / denom;
}
