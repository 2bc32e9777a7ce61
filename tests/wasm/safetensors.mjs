// safetensors files in the WebAssembly tests (no dependency, so that a script run outside the
// test runner, tests/wasm/random-gpt2.mjs, can use it): u64 little-endian header length, JSON
// header padded with spaces to 8 bytes, then the tensors' little-endian bytes in header order.

// `tensors`: { name: { dtype: 'F32' | 'I32' | ..., shape, data: a typed array } }, in file order.
export function encodeSafetensors(tensors, metadata = null) {
  const header = metadata ? { __metadata__: metadata } : {};
  const parts = [];
  let offset = 0;
  for (const [name, { dtype, shape, data }] of Object.entries(tensors)) {
    const bytes = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
    header[name] = { dtype, shape, data_offsets: [offset, offset + bytes.length] };
    parts.push(bytes);
    offset += bytes.length;
  }
  let json = JSON.stringify(header);
  while ((json.length + 8) % 8) json += ' ';
  const out = new Uint8Array(8 + json.length + offset);
  new DataView(out.buffer).setBigUint64(0, BigInt(json.length), true);
  out.set(new TextEncoder().encode(json), 8);
  let at = 8 + json.length;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

// -> { metadata, tensors: Map(name -> { dtype, shape, data: a Buffer view of the bytes }) }.
export function parseSafetensors(bytes) {
  const buf = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const n = Number(buf.readBigUInt64LE(0));
  const header = JSON.parse(buf.subarray(8, 8 + n).toString('utf8'));
  const base = 8 + n;
  const tensors = new Map();
  for (const [name, info] of Object.entries(header)) {
    if (name === '__metadata__') continue;
    const [a, b] = info.data_offsets;
    tensors.set(name, { dtype: info.dtype, shape: info.shape, data: buf.subarray(base + a, base + b) });
  }
  return { metadata: header.__metadata__ ?? {}, tensors };
}

// An F32 tensor's values (a copy: a Buffer view need not be 4-byte aligned).
export function f32(t) {
  return new Float32Array(t.data.buffer.slice(t.data.byteOffset, t.data.byteOffset + t.data.byteLength));
}
