// embedding_backward (C++ twin: kernels/embedding.cpp): the scatter-add of the lookup, made
// deterministic without atomics by gathering instead of scattering:
//   entry `dtok`: one workgroup per vocabulary row v; its threads own the columns and walk all B*T
//                 positions in order, adding dx[i] where tokens[i] == v (the CPU's order, so the
//                 sums are bitwise those of the C++ loop);
//   entry `dpos`: one thread per (position row, column), summing the B sequences in order.
// Rows that receive nothing are zeroed (acc 0) or left as they are (acc 1).
struct Params { BT: u32, T: u32, C: u32, V: u32, ctx: u32, _pad0: u32, _pad1: u32, _pad2: u32 }
@group(0) @binding(0) var<uniform> U: Params;
@group(0) @binding(1) var<storage, read> dx: array<f32>;
@group(0) @binding(2) var<storage, read> tokens: array<i32>;
@group(0) @binding(3) var<storage, read> pos0: array<i32>;
@group(0) @binding(4) var<storage, read_write> dtok: array<f32>;
@group(0) @binding(5) var<storage, read_write> dpos: array<f32>;

override HAS_POS0: bool = false;
override ACC_TOK: bool = false;
override ACC_POS: bool = false;

const CHUNK: u32 = 256u;
var<workgroup> toks: array<i32, 256>;

@compute @workgroup_size(64)
fn dtok_main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
             @builtin(local_invocation_index) lid: u32) {
  let v = wid.y * nwg.x + wid.x;
  if (v >= U.V) { return; }
  // Up to 8 columns per thread are kept in registers while the positions stream by.
  for (var c0 = 0u; c0 < U.C; c0 += 512u) {
    var acc: array<f32, 8>;
    for (var e = 0u; e < 8u; e++) {
      let c = c0 + lid + 64u * e;
      acc[e] = 0.0;
      if (ACC_TOK && c < U.C) { acc[e] = dtok[v * U.C + c]; }
    }
    for (var i0 = 0u; i0 < U.BT; i0 += CHUNK) {
      for (var k = lid; k < CHUNK; k += 64u) {
        var tk = -1;
        if (i0 + k < U.BT) { tk = tokens[i0 + k]; }
        toks[k] = tk;
      }
      workgroupBarrier();
      let n = min(CHUNK, U.BT - i0);
      for (var k = 0u; k < n; k++) {
        if (u32(toks[k]) == v) {
          let row = (i0 + k) * U.C;
          for (var e = 0u; e < 8u; e++) {
            let c = c0 + lid + 64u * e;
            if (c < U.C) { acc[e] += dx[row + c]; }
          }
        }
      }
      workgroupBarrier();
    }
    for (var e = 0u; e < 8u; e++) {
      let c = c0 + lid + 64u * e;
      if (c < U.C) { dtok[v * U.C + c] = acc[e]; }
    }
  }
}

@compute @workgroup_size(256)
fn dpos_main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
             @builtin(local_invocation_index) lid: u32) {
  let idx = (wid.y * nwg.x + wid.x) * 256u + lid;
  if (idx >= U.ctx * U.C) { return; }
  let c = idx % U.C;
  let p = idx / U.C;
  var p0 = 0u;
  if (HAS_POS0) { p0 = u32(pos0[0]); }
  var acc = 0.0;
  if (ACC_POS) { acc = dpos[idx]; }
  if (p >= p0 && p < p0 + U.T) {
    let t = p - p0;
    let nb = U.BT / U.T;
    for (var b = 0u; b < nb; b++) { acc += dx[(b * U.T + t) * U.C + c]; }
  }
  dpos[idx] = acc;
}
