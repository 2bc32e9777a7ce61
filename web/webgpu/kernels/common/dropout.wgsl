// The counter-based dropout generator of docs/model.md "Dropout" (C++ twin: engine's dropout
// kernels). Every mask bit is a pure function of (stream, key, step, element index), so a backward
// kernel regenerates the forward's mask instead of reading a stored one. u32 arithmetic wraps
// mod 2^32 in WGSL, as the rule wants.
fn dropout_hash(x0: u32) -> u32 {
  var x = x0;
  x ^= x >> 16u;
  x *= 0x7feb352du;
  x ^= x >> 15u;
  x *= 0x846ca68bu;
  x ^= x >> 16u;
  return x;
}

// Per op per step: base = h(h(h(stream) ^ step) ^ key); seed = {key, step} (the dropout.seed input).
fn dropout_base(stream: u32, key: u32, step: u32) -> u32 {
  return dropout_hash(dropout_hash(dropout_hash(stream) ^ step) ^ key);
}

// Element `index` is kept iff the top 24 bits of r = h(base ^ h(index)) reach the threshold
// (floor(p * 2^24 + 0.5)).
fn dropout_keep(base: u32, index: u32, threshold: u32) -> bool {
  return (dropout_hash(base ^ dropout_hash(index)) >> 8u) >= threshold;
}
