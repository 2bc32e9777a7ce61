// The safetensors container (docs/checkpoint-format.md): u64 little-endian header length N, a
// JSON header {"__metadata__": {str: str}, name: {dtype, shape, data_offsets: [begin, end)}},
// padded with spaces so that 8 + N is a multiple of 8, then the raw little-endian tensor bytes.
// Tensors are F32 or I32 in memory. A half-precision export (`ptl export --dtype f16|bf16`)
// stores F32 weights as F16 or BF16: decoding widens them to F32 (exactly), as the engine does.

export type StDType = 'F32' | 'I32';
type FileDType = StDType | 'F16' | 'BF16';
const elementBytes: Record<FileDType, number> = { F32: 4, I32: 4, F16: 2, BF16: 2 };

// IEEE binary16 to a float32 value (exact: every F16 is a float32).
function f16ToF32(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const exp = (h >> 10) & 0x1f;
  const mant = h & 0x3ff;
  if (exp === 0x1f) return mant ? NaN : sign * Infinity;
  if (exp === 0) return sign * mant * 2 ** -24; // subnormal (or zero, keeping its sign)
  return sign * (1024 + mant) * 2 ** (exp - 25);
}

function widen(raw: Uint8Array, dtype: 'F16' | 'BF16'): Float32Array {
  const n = raw.byteLength / 2;
  const view = new DataView(raw.buffer, raw.byteOffset, raw.byteLength);
  const out = new Float32Array(n);
  if (dtype === 'F16') {
    for (let i = 0; i < n; ++i) out[i] = f16ToF32(view.getUint16(2 * i, true));
  } else {
    // BF16 is the high half of a float32: place its bits there.
    const bits = new Uint32Array(out.buffer);
    for (let i = 0; i < n; ++i) bits[i] = view.getUint16(2 * i, true) << 16;
  }
  return out;
}

export interface StTensor {
  name: string;
  dtype: StDType;
  shape: number[];
  data: Float32Array | Int32Array; // a copy, 4-byte aligned
}

export interface SafeTensorsFile {
  metadata: Record<string, string>;
  tensors: StTensor[]; // in data-offset order as found in the file
}

export class SafeTensorsError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SafeTensorsError';
  }
}

function numel(shape: number[]): number {
  return shape.reduce((a, b) => a * b, 1);
}

export function decodeSafeTensors(bytes: Uint8Array, what = 'checkpoint'): SafeTensorsFile {
  const fail = (msg: string): never => {
    throw new SafeTensorsError(`${what}: ${msg}`);
  };
  if (bytes.byteLength < 8) fail('file is too short to be safetensors');
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const n = Number(view.getBigUint64(0, true));
  if (n > 100_000_000 || 8 + n > bytes.byteLength) fail(`header length ${n} lies beyond the file`);
  let header: unknown;
  try {
    header = JSON.parse(new TextDecoder().decode(bytes.subarray(8, 8 + n)));
  } catch (e) {
    fail(`header is not valid JSON (${(e as Error).message})`);
  }
  if (typeof header !== 'object' || header === null || Array.isArray(header)) fail('header is not a JSON object');
  const h = header as Record<string, unknown>;
  const dataStart = 8 + n;
  const dataLen = bytes.byteLength - dataStart;
  const metadata: Record<string, string> = {};
  if ('__metadata__' in h) {
    const m = h['__metadata__'];
    if (typeof m !== 'object' || m === null) fail('__metadata__ is not an object');
    for (const [k, v] of Object.entries(m as Record<string, unknown>)) {
      if (typeof v !== 'string') fail(`metadata value '${k}' is not a string`);
      metadata[k] = v as string;
    }
  }
  const tensors: (StTensor & { begin: number; end: number })[] = [];
  for (const [name, e] of Object.entries(h)) {
    if (name === '__metadata__') continue;
    const t = e as { dtype?: unknown; shape?: unknown; data_offsets?: unknown };
    if (typeof t.dtype !== 'string' || !Object.hasOwn(elementBytes, t.dtype))
      fail(`tensor '${name}' has dtype ${String(t.dtype)}; only F32, F16, BF16 and I32 are supported`);
    const dtype = t.dtype as FileDType;
    if (!Array.isArray(t.shape) || !t.shape.every((s) => Number.isInteger(s) && s >= 0))
      fail(`tensor '${name}' has a bad shape`);
    if (!Array.isArray(t.data_offsets) || t.data_offsets.length !== 2) fail(`tensor '${name}' has bad data_offsets`);
    const [begin, end] = t.data_offsets as number[];
    const shape = t.shape as number[];
    if (!(Number.isInteger(begin) && Number.isInteger(end) && begin >= 0 && end >= begin && end <= dataLen))
      fail(`tensor '${name}' has offsets outside the data area`);
    const need = elementBytes[dtype] * numel(shape);
    if (end - begin !== need) fail(`tensor '${name}' has ${end - begin} bytes but ${dtype} x its shape needs ${need}`);
    const raw = bytes.slice(dataStart + begin, dataStart + end); // copy: aligned
    const data =
      dtype === 'F16' || dtype === 'BF16'
        ? widen(raw, dtype)
        : dtype === 'F32'
          ? new Float32Array(raw.buffer)
          : new Int32Array(raw.buffer);
    tensors.push({ name, dtype: dtype === 'I32' ? 'I32' : 'F32', shape, data, begin, end });
  }
  tensors.sort((a, b) => a.begin - b.begin);
  let pos = 0;
  for (const t of tensors) {
    if (t.begin !== pos) fail(`tensor '${t.name}' overlaps another or leaves a gap`);
    pos = t.end;
  }
  if (pos !== dataLen) fail('trailing bytes after the last tensor');
  return { metadata, tensors: tensors.map(({ name, dtype, shape, data }) => ({ name, dtype, shape, data })) };
}

// Tensors are written in the given order, contiguously from offset 0; the header is compact JSON
// padded with spaces to a multiple of 8 bytes (as ptl writes it).
export function encodeSafeTensors(file: SafeTensorsFile): Uint8Array {
  const header: Record<string, unknown> = {};
  if (Object.keys(file.metadata).length > 0) header['__metadata__'] = file.metadata;
  let off = 0;
  for (const t of file.tensors) {
    const bytes = t.data.byteLength;
    if (bytes !== 4 * numel(t.shape)) throw new SafeTensorsError(`tensor '${t.name}': data does not match its shape`);
    header[t.name] = { dtype: t.dtype, shape: t.shape, data_offsets: [off, off + bytes] };
    off += bytes;
  }
  const json = new TextEncoder().encode(JSON.stringify(header));
  const padded = Math.ceil((8 + json.byteLength) / 8) * 8 - 8;
  const out = new Uint8Array(8 + padded + off);
  new DataView(out.buffer).setBigUint64(0, BigInt(padded), true);
  out.fill(0x20, 8, 8 + padded);
  out.set(json, 8);
  let p = 8 + padded;
  for (const t of file.tensors) {
    out.set(new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength), p);
    p += t.data.byteLength;
  }
  return out;
}
