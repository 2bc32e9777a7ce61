// Workgroup reductions over the first n threads (n a power of two, at most RED_WG): a tree in a
// fixed order, so every run gives the same bits. Every thread of the workgroup must call them
// (they contain barriers) with the same n; each returns the result to all threads and leaves
// `red` free for the next call. The including kernel declares `const RED_WG: u32` (its largest
// workgroup size). Used with `// #include reduce` by the row kernels (layernorm, cross-entropy,
// grad_norm, attention_cached, attention_probs).
var<workgroup> red: array<f32, RED_WG>;

fn wg_sum(v: f32, lid: u32, n: u32) -> f32 {
  red[lid] = v;
  workgroupBarrier();
  for (var s = n / 2u; s > 0u; s >>= 1u) {
    if (lid < s) { red[lid] += red[lid + s]; }
    workgroupBarrier();
  }
  let r = red[0];
  workgroupBarrier();
  return r;
}

fn wg_max(v: f32, lid: u32, n: u32) -> f32 {
  red[lid] = v;
  workgroupBarrier();
  for (var s = n / 2u; s > 0u; s >>= 1u) {
    if (lid < s) { red[lid] = max(red[lid], red[lid + s]); }
    workgroupBarrier();
  }
  let r = red[0];
  workgroupBarrier();
  return r;
}
