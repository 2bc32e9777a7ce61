// The host's part of dropout (docs/model.md "Dropout"): the key of dropout.seed = {key, step}
// from the run's u64 seed. The masks themselves are computed by the kernels
// (kernels/common/dropout.wgsl) from that input, the op's stream and the element index.

// key = u32(seed) ^ u32(seed >> 32). A seed given as a number must be an exact integer (JSON
// metadata holds seeds below 2^53 exactly); larger seeds come as a bigint.
export function dropoutKey(seed: number | bigint): number {
  if (typeof seed === 'number' && !(Number.isSafeInteger(seed) && seed >= 0))
    throw new RangeError(`seed ${seed} is not a non-negative integer below 2^53 (pass a bigint)`);
  const s = BigInt.asUintN(64, BigInt(seed));
  return Number((s & 0xffffffffn) ^ (s >> 32n));
}
