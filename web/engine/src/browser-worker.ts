// The entry point of a browser Web Worker that runs the engine: it only calls serveEngine(self).
//
// It must run as a *classic* worker: loadModule's browser path loads the Emscripten glue with
// importScripts, which module workers do not have. So bundle this file into one classic script,
// e.g. (what tests/browser/run.sh does):
//
//   esbuild web/engine/dist/browser-worker.js --bundle --format=iife --platform=browser \
//     --external:node:* --outfile=engine-worker.js
//
// and start it with `new Worker("engine-worker.js")` (no {type: "module"}); then talk to it with
// EngineClient (worker.ts). The node:* imports are behind Node-only branches of engine.ts.
import { serveEngine, type Port } from './worker.js';

serveEngine(globalThis as unknown as Port);
