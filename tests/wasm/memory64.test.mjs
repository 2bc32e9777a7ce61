// The Memory64 build: the boundary adapter (web/engine/src/memory64.ts) and the patched glue
// (wasm/patch-memory64.cjs) with pointers above 2 GiB, where 32-bit glue arithmetic would wrap.
// Runs when build-wasm/memory64 exists and this Node runs Memory64 (Node 20:
// --experimental-wasm-memory64; tests/wasm/run.sh memory64 passes it).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';

import {
  BUILD_DIR,
  Engine,
  EngineError,
  VARIANT,
  dataFile,
  detectCapabilities,
  load,
  loadModule,
  nativeSmallRun,
  parseSafetensors,
} from './helpers.mjs';

const built = fs.existsSync(path.join(BUILD_DIR, 'memory64', 'ptl_engine.wasm'));
const skip = !built
  ? 'build-wasm/memory64 not built'
  : !detectCapabilities().memory64
    ? 'this Node does not run Memory64 (--experimental-wasm-memory64)'
    : false;

test('memory64: engine calls with pointers above 2 GiB (strings, exceptions, checkpoints)', { skip }, async () => {
  const module = await load('memory64');
  try {
    assert.equal(module.build.memory64, true);
    // Push the heap past 2^31 (Node 20 caps a 64-bit memory at 4 GiB; Chromium allows 16).
    const filler = module.mod._malloc(2.5 * 2 ** 30);
    assert.ok(filler > 0, 'could not allocate 2.5 GiB');
    assert.ok(module.heapBytes() > 2 ** 31);
    const engine = await Engine.create({ preset: 'tiny', train: { steps: 10 } }, module);
    try {
      await engine.setCorpus(fs.readFileSync(dataFile()).subarray(0, 100000));
      const m = await engine.train(3);
      assert.ok(m.every((x) => Number.isFinite(x.loss) && x.seconds >= 0 && x.seconds < 60));
      const addr = module.addr(module.mod._ptl_info(1));
      console.log(
        `# heap ${(module.heapBytes() / 2 ** 30).toFixed(2)} GiB; a result string at ${(addr / 2 ** 30).toFixed(2)} GiB`,
      );
      await assert.rejects(
        Engine.create({ preset: 'tiny', model: { n_heads: 5 } }, module),
        (e) => e instanceof EngineError && /not divisible/.test(e.message),
      );
      await assert.rejects(engine.importCheckpoint(new Uint8Array([1, 2, 3])), EngineError);
      const nativeFile = path.join(nativeSmallRun(), 'model.tinygpt');
      const nativeBytes = new Uint8Array(fs.readFileSync(nativeFile));
      await engine.importCheckpoint(nativeBytes);
      const a = parseSafetensors(nativeBytes),
        b = parseSafetensors(await engine.exportCheckpoint());
      for (const [name, t] of a.tensors) assert.ok(Buffer.compare(b.tensors.get(name).data, t.data) === 0, name);
      const g = await engine.generate('ROMEO:', { maxTokens: 10, temperature: 0 });
      assert.equal(g.tokens.length, 10);
    } finally {
      engine.dispose();
    }
  } finally {
    module.terminate();
  }
});

test('memory64: a binary that fails to instantiate rejects the load with the reason (no hang)', async () => {
  // The Memory64 loader path (our instantiateWasm) on a copy of a build whose .wasm is cut short
  // after its import, function and export sections: the loader's signature reader still parses
  // it, then WebAssembly.instantiate fails. The glue alone would wait forever for the instance;
  // the load must reject instead. The memory64 build when there is one, else the tested variant
  // (the loader's code path is the same; it is chosen by the variant name).
  const source = path.join(BUILD_DIR, built ? 'memory64' : VARIANT);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ptl-m64-'));
  try {
    fs.mkdirSync(path.join(dir, 'memory64'));
    for (const f of fs.readdirSync(source).filter((f) => f.startsWith('ptl_engine.'))) {
      const bytes = fs.readFileSync(path.join(source, f));
      fs.writeFileSync(
        path.join(dir, 'memory64', f),
        f === 'ptl_engine.wasm' ? bytes.subarray(0, Math.floor(bytes.length * 0.9)) : bytes,
      );
    }
    const timeout = new Promise((_, reject) => setTimeout(() => reject(new Error('the load hung')), 20000).unref());
    await assert.rejects(
      Promise.race([loadModule({ buildDir: dir, variant: 'memory64' }), timeout]),
      (e) => e instanceof EngineError && /could not start the memory64 engine/.test(e.message),
    );
  } finally {
    // Not before exit: the threaded glue may still be starting its workers from this folder.
    process.on('exit', () => fs.rmSync(dir, { recursive: true, force: true }));
  }
});
