#!/usr/bin/env node
// Post-processes the Memory64 build's JavaScript glue (Emscripten 3.1.6), in place.
//
//   node wasm/patch-memory64.cjs build-wasm/memory64/ptl_engine.js
//
// The glue addresses the heap with 32-bit arithmetic (`HEAP32[p >>> 2]`, `ptr >>>= 0`,
// `HEAPU8.subarray(p >>> 0, ...)`), which wraps pointers above 4 GiB, and it mixes BigInt
// pointers with Numbers. The BigInt side is handled at load time by web/src/engine/memory64.ts
// (pointers reach the glue as Numbers); this script makes the glue's pointer arithmetic exact for
// Numbers up to 2^53: `x >>> k` used as a heap index becomes `x / 2^k` (pointers are aligned),
// `x >>> 0` on a pointer becomes `x`. It needs the unminified glue (the build links with -O0).
// It fails if a pattern it expects is missing, so that a new Emscripten cannot slip through.
"use strict";
const fs = require("fs");

const file = process.argv[2];
if (!file) {
  console.error("usage: patch-memory64.cjs ptl_engine.js");
  process.exit(2);
}
let js = fs.readFileSync(file, "utf8");
if (js.includes("/* ptl: memory64 patched */")) process.exit(0);
const counts = {};
function sub(name, re, fn, min = 1) {
  let n = 0;
  js = js.replace(re, (...m) => {
    n++;
    return fn(...m);
  });
  counts[name] = n;
  if (n < min) throw new Error(`patch-memory64: pattern '${name}' not found (${re}); is this the glue of Emscripten 3.1.6?`);
}

// Heap indexing: HEAPxx[expr >>> k] -> HEAPxx[(expr) / 2^k]; heap[expr >>> 0] -> heap[expr].
sub("index>>>k", /\[([^\[\]]*?) >>> ([1-3])\]/g, (_, e, k) => `[(${e}) / ${2 ** Number(k)}]`);
sub("index>>>0", /\[([^\[\]]*?) >>> 0\]/g, (_, e) => `[${e}]`);
// The same with a signed shift (the glue's wasm64-aware HEAP64 accesses): negative above 2 GiB.
sub("index>>k", /\[([^\[\]]*?) >> ([1-3])\]/g, (_, e, k) => `[(${e}) / ${2 ** Number(k)}]`);
// 64-bit stores of a Number at a pointer (size_t, pointers): two 32-bit words.
const store64 = (addr, value) => `(HEAPU32[(${addr}) / 4] = (${value}) % 4294967296, HEAPU32[(${addr}) / 4 + 1] = Math.floor((${value}) / 4294967296))`;
// environ_get: the environ array holds 8-byte pointers in wasm64, not 4-byte ones.
sub("environ_get", /HEAP32\[\(__environ \+ i \* 4\) \/ 4\] = ptr;/g, () => store64("__environ + i * 8", "ptr") + ";");
// environ_sizes_get: both results are size_t.
sub("environ_sizes_get", /HEAP32\[\((penviron_count|penviron_buf_size)\) \/ 4\] = (strings\.length|bufSize);/g,
    (_, p, v) => store64(p, v) + ";", 2);
// clock_gettime: timespec is {int64 tv_sec; long tv_nsec} (both 8 bytes): clear the high words.
sub("clock_gettime", /(HEAP32\[\(tp\) \/ 4\] = now \/ 1e3 \| 0;)/g, (_, m) => `${m} HEAP32[(tp + 4) / 4] = 0; HEAP32[(tp + 12) / 4] = 0;`);
// Pointer normalisation: `p >>>= 0;` -> `p = Number(p);`, `p = p >>> 0;` likewise.
sub("p>>>=0", /(\b\w+) >>>= 0;/g, (_, v) => `${v} = Number(${v});`);
sub("p=p>>>0", /(\b\w+) = \1 >>> 0;/g, (_, v) => `${v} = Number(${v});`, 0);
// Arguments: subarray(a >>> 0, b >>> 0), set(x, p >>> 0), copyWithin(...).
sub("arg>>>0", /([\w.\]\)]+(?: [+-] [\w.]+)?) >>> 0([,)])/g, (_, e, end) => `${e}${end}`, 0);
// wasmMemory.grow(bytes + 65535 >>> 16): pages, exactly.
sub("grow", /wasmMemory\.grow\(([^;]*?) >>> 16\)/g, (_, e) => `wasmMemory.grow(Math.floor((${e}) / 65536))`, 0);

// find_matching_catch returns the catch info pointer `| 0`: negative above 2 GiB.
sub("catchInfo|0", /return catchInfo\.ptr \| 0;/g, () => "return catchInfo.ptr;");
// Exception destructors take the exception pointer (an i64): the glue passes a Number.
sub("exception destructor", /getWasmTableEntry\(destructor\)\(info\.excPtr\);/g, () => "getWasmTableEntry(destructor)(BigInt(info.excPtr));");

// The heap limit: this glue caps it at 4 GiB whatever MAXIMUM_MEMORY says; use the build's.
const maxMemory = Number(process.env.PTL_MEMORY64_MAX_BYTES || 16 * 2 ** 30);
sub("heap max", /(function _emscripten_get_heap_max\(\) \{\s*return )4294901760;/g, (_, head) => `${head}${maxMemory};`);

const left = (js.match(/>>>/g) || []).length;
js = "/* ptl: memory64 patched */\n" + js;
fs.writeFileSync(file, js);
console.error(`patch-memory64: ${JSON.stringify(counts)}; ${left} '>>>' left (not pointer arithmetic)`);
