// Loading the Memory64 build: a boundary adapter between its wasm64 module and Emscripten
// 3.1.6's JavaScript glue.
//
// In a wasm64 module every pointer and size_t is an i64, which JavaScript sees as a BigInt. This
// Emscripten's glue was written for Numbers: its library functions compute with the pointers
// they receive (`HEAP32[p >> 2]`, `p + 4`: "Cannot mix BigInt and other types") and pass Numbers
// to exports that take pointers ("Cannot convert 5 to a BigInt"). Later Emscripten versions
// convert at the boundary; we do the same here, through the glue's Module.instantiateWasm hook:
//
// - imports (JavaScript called by wasm): i64 arguments arrive as Numbers, and an i64 result is
//   returned as a BigInt. `invoke_*` trampolines (C++ exceptions) pass their arguments on to a
//   wasm function unchanged, so only their first argument (the table index) is converted.
// - exports (wasm called by JavaScript): Number arguments for i64 parameters become BigInts, and
//   i64 results become Numbers.
//
// Pointers stay exact as Numbers up to 2^53. The glue's own `>>> 0` / `>>> 2` pointer
// arithmetic (32-bit) is rewritten by wasm/patch-memory64.cjs at build time.

const I64 = 0x7e;

interface FuncType {
  params: number[];
  results: number[];
}

interface Signatures {
  imports: Map<string, FuncType>; // "module.name"
  exports: Map<string, FuncType>;
}

class Reader {
  pos = 0;
  constructor(readonly b: Uint8Array) {}
  byte(): number {
    const v = this.b[this.pos++];
    if (v === undefined) throw new Error('truncated WebAssembly module');
    return v;
  }
  u32(): number {
    let result = 0,
      shift = 0,
      byte: number;
    do {
      byte = this.byte();
      result += (byte & 0x7f) * 2 ** shift;
      shift += 7;
    } while (byte & 0x80);
    return result;
  }
  name(): string {
    const n = this.u32();
    const s = new TextDecoder().decode(this.b.subarray(this.pos, this.pos + n));
    this.pos += n;
    return s;
  }
  limits(): void {
    const flags = this.u32();
    this.u32();
    if (flags & 1) this.u32();
  }
}

/** The function signatures of a module's imports and exports, read from its binary. */
export function readSignatures(binary: Uint8Array): Signatures {
  const r = new Reader(binary);
  r.pos = 8;
  const types: FuncType[] = [];
  const funcTypes: number[] = []; // function index -> type index (imports first)
  const imports = new Map<string, FuncType>();
  const exportsList: Array<[string, number]> = [];
  while (r.pos < binary.length) {
    const id = r.byte();
    const size = r.u32();
    const end = r.pos + size;
    if (id === 1) {
      for (let n = r.u32(); n > 0; n--) {
        r.byte(); // 0x60
        const params = Array.from({ length: r.u32() }, () => r.byte());
        const results = Array.from({ length: r.u32() }, () => r.byte());
        types.push({ params, results });
      }
    } else if (id === 2) {
      for (let n = r.u32(); n > 0; n--) {
        const mod = r.name(),
          name = r.name(),
          kind = r.byte();
        if (kind === 0) {
          const t = r.u32();
          funcTypes.push(t);
          const type = types[t];
          if (type) imports.set(`${mod}.${name}`, type);
        } else if (kind === 1) {
          r.byte();
          r.limits();
        } else if (kind === 2) r.limits();
        else if (kind === 3) {
          r.byte();
          r.byte();
        } else throw new Error(`unknown import kind ${kind}`);
      }
    } else if (id === 3) {
      for (let n = r.u32(); n > 0; n--) funcTypes.push(r.u32());
    } else if (id === 7) {
      for (let n = r.u32(); n > 0; n--) {
        const name = r.name(),
          kind = r.byte(),
          index = r.u32();
        if (kind === 0) exportsList.push([name, index]);
      }
    }
    r.pos = end;
  }
  const exports = new Map<string, FuncType>();
  for (const [name, index] of exportsList) {
    const t = funcTypes[index];
    const type = t === undefined ? undefined : types[t];
    if (type) exports.set(name, type);
  }
  return { imports, exports };
}

type AnyFn = (...args: unknown[]) => unknown;

const toNumber = (v: unknown): unknown => (typeof v === 'bigint' ? Number(v) : v);
const toBigInt = (v: unknown): unknown =>
  typeof v === 'number' ? BigInt(Math.trunc(v)) : typeof v === 'boolean' ? BigInt(v ? 1 : 0) : v;

function wrapImport(name: string, fn: AnyFn, type: FuncType): AnyFn {
  const i64Result = type.results[0] === I64;
  const invoke = name.startsWith('invoke_');
  const i64Params = type.params.map((p) => p === I64);
  if (!i64Result && !i64Params.some(Boolean)) return fn;
  return function (this: unknown, ...args: unknown[]) {
    if (invoke) {
      args[0] = toNumber(args[0]);
    } else {
      for (let i = 0; i < args.length; i++) if (i64Params[i]) args[i] = toNumber(args[i]);
    }
    const r = fn.apply(this, args);
    return i64Result ? toBigInt(r ?? 0) : invoke ? r : toNumber(r);
  };
}

function wrapExport(fn: AnyFn, type: FuncType): AnyFn {
  const i64Result = type.results[0] === I64;
  const i64Params = type.params.map((p) => p === I64);
  if (!i64Result && !i64Params.some(Boolean)) return fn;
  const wrapped = function (...args: unknown[]) {
    for (let i = 0; i < args.length; i++) if (i64Params[i]) args[i] = toBigInt(args[i]);
    const r = fn(...args);
    return i64Result ? toNumber(r) : r;
  };
  return wrapped;
}

/**
 * The glue grows the heap with `wasmMemory.grow(pages)`, a Number. Engines that implement the
 * final Memory64 JavaScript API (Chromium 156, here) take and return BigInts for a 64-bit memory's
 * page counts ("Cannot convert 1 to a BigInt"); Node 20's experimental Memory64 takes Numbers.
 * So grow gets an own wrapper that retries with a BigInt and always returns a Number.
 */
function adaptMemory(memory: WebAssembly.Memory): WebAssembly.Memory {
  const grow = WebAssembly.Memory.prototype.grow;
  Object.defineProperty(memory, 'grow', {
    configurable: true,
    value(delta: number | bigint): number {
      let old: unknown;
      try {
        old = grow.call(memory, delta as number);
      } catch (e) {
        if (!(e instanceof TypeError) || typeof delta !== 'number') throw e;
        old = grow.call(memory, BigInt(delta) as unknown as number);
      }
      return Number(old);
    },
  });
  return memory;
}

/**
 * Module.instantiateWasm for the Memory64 build: instantiates `binary` with the glue's imports
 * adapted, and hands the glue exports adapted the other way. The glue waits for `receive` and
 * has no way to hear of a failure, so a failed instantiation (an invalid or truncated binary, a
 * memory the browser refuses) goes to `onError`, which must reject the load.
 */
export function memory64Instantiator(binary: Uint8Array, onError: (e: unknown) => void) {
  const sigs = readSignatures(binary);
  return (
    imports: Record<string, Record<string, unknown>>,
    receive: (instance: { exports: Record<string, unknown> }, module: WebAssembly.Module) => void,
  ) => {
    const adapted: Record<string, Record<string, unknown>> = {};
    for (const [mod, entries] of Object.entries(imports)) {
      adapted[mod] = {};
      for (const [name, value] of Object.entries(entries)) {
        const type = sigs.imports.get(`${mod}.${name}`);
        adapted[mod]![name] = typeof value === 'function' && type ? wrapImport(name, value as AnyFn, type) : value;
      }
    }
    WebAssembly.instantiate(binary as Uint8Array<ArrayBuffer>, adapted as WebAssembly.Imports)
      .then(({ instance, module }) => {
        const exports: Record<string, unknown> = {};
        for (const [name, value] of Object.entries(instance.exports)) {
          const type = sigs.exports.get(name);
          exports[name] =
            value instanceof WebAssembly.Memory
              ? adaptMemory(value)
              : typeof value === 'function' && type
                ? wrapExport(value as AnyFn, type)
                : value;
        }
        receive({ exports }, module);
      })
      .catch(onError);
    return {}; // asynchronous instantiation
  };
}
