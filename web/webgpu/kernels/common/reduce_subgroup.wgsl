enable subgroups;
// The reductions of reduce.wgsl (same contract: wg_sum / wg_max over the first n threads, n at
// most RED_WG, called by every thread of the workgroup with the same n, the result in every
// thread, `red` free again afterwards) with subgroup operations: each subgroup reduces its
// values with subgroupAdd / subgroupMax, the partial results meet in `red`, and every subgroup
// reduces them again. Two barriers per call instead of the tree's 2 + log2(n).
// The executor includes this file in place of reduce.wgsl (`// #include reduce` resolved to
// `reduce_subgroup`) where the device has `subgroups`; the loader moves the `enable` above to
// the front of the module.
//
// Nothing here assumes a subgroup size or which invocations form a subgroup: a subgroup's slot
// in `red` is its smallest local index, the lane and size come from subgroup operations over
// the active invocations (so a subgroup larger than the workgroup, only partly filled, works
// too), and every lane reads the slots lane, lane + size, ... . The summation order is fixed by
// the device's subgroup layout, so results repeat run to run on one device (not bitwise across
// devices or against reduce.wgsl). Subgroup operations need uniform control flow; callers already
// keep these calls workgroup-uniform for the barriers.
var<workgroup> red: array<f32, RED_WG>;

// max's identity where values are finite (the kernels use -1e30 sentinels, never infinities).
const RED_LOWEST: f32 = -0x1.fffffep+127f;

fn wg_sum(v: f32, lid: u32, n: u32) -> f32 {
  let part = subgroupAdd(select(0.0, v, lid < n));
  let first = subgroupMin(lid);
  // One slot per subgroup, the others zero (adding zeros changes no sum).
  if (lid < n) { red[lid] = select(0.0, part, lid == first); }
  workgroupBarrier();
  let lane = subgroupExclusiveAdd(1u);
  let size = subgroupAdd(1u);
  var t = 0.0;
  for (var i = lane; i < n; i += size) { t += red[i]; }
  let r = subgroupAdd(t);
  workgroupBarrier();
  return r;
}

fn wg_max(v: f32, lid: u32, n: u32) -> f32 {
  let part = subgroupMax(select(RED_LOWEST, v, lid < n));
  // max is idempotent: every thread may store its subgroup's maximum.
  if (lid < n) { red[lid] = part; }
  workgroupBarrier();
  let lane = subgroupExclusiveAdd(1u);
  let size = subgroupAdd(1u);
  var t = RED_LOWEST;
  for (var i = lane; i < n; i += size) { t = max(t, red[i]); }
  let r = subgroupMax(t);
  workgroupBarrier();
  return r;
}
