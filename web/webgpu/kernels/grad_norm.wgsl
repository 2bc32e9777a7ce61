// grad_norm: norm = sqrt(sum over every gradient tensor of sum_i g_i^2)
// (C++ twin: the grad_norm case of Executor::run_op with sum_squares in kernels/adamw.cpp).
// A program has one gradient per trainable parameter (hundreds for big models), more than one
// dispatch can bind, so:
//   entry `partial_main`: per tensor, each workgroup squares and sums a chunk of CHUNK elements
//                         into its own slot of a scratch buffer (slots [base, base + groups));
//   entry `finish_main`:  one workgroup adds all slots in a fixed order and takes the sqrt.
// Deterministic (no atomics). The CPU sums in double; here fp32 tree sums of short runs.
struct Params { n: u32, base: u32, count: u32, _pad: u32 }
@group(0) @binding(0) var<uniform> U: Params;
@group(0) @binding(1) var<storage, read> g: array<f32>;
@group(0) @binding(2) var<storage, read_write> partials: array<f32>;
@group(0) @binding(3) var<storage, read_write> norm: array<f32>;

const CHUNK: u32 = 2048u;  // elements per workgroup: 8 per thread
const RED_WG: u32 = 256u;
// #include reduce

@compute @workgroup_size(256)
fn partial_main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                @builtin(local_invocation_index) lid: u32) {
  let grp = wid.y * nwg.x + wid.x;
  let start = grp * CHUNK;
  var s = 0.0;
  for (var e = lid; e < CHUNK; e += 256u) {
    let i = start + e;
    if (i < U.n) { let x = g[i]; s = fma(x, x, s); }
  }
  let total = wg_sum(s, lid, 256u);
  if (lid == 0u && start < U.n) { partials[U.base + grp] = total; }
}

@compute @workgroup_size(256)
fn finish_main(@builtin(local_invocation_index) lid: u32) {
  var s = 0.0;
  for (var i = lid; i < U.count; i += 256u) { s += partials[i]; }
  let total = wg_sum(s, lid, 256u);
  if (lid == 0u) { norm[0] = sqrt(total); }
}
