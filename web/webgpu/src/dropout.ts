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

// A site's stream: FNV-1a 32 of its name's bytes ("blocks.0.attn.drop").
export function dropoutStream(name: string): number {
  let h = 2166136261;
  for (const b of new TextEncoder().encode(name)) h = Math.imul(h ^ b, 16777619) >>> 0;
  return h >>> 0;
}

// The attributes of a dropout site with rate p, as the engine writes them into a program.
export function dropoutAttrs(p: number, name: string): Record<'p' | 'threshold' | 'scale' | 'stream', number> {
  if (!(p >= 0 && p < 1)) throw new RangeError(`dropout must be at least 0 and below 1, got ${p}`);
  return { p, threshold: Math.floor(p * 16777216 + 0.5), scale: Math.fround(1 / (1 - p)), stream: dropoutStream(name) };
}
