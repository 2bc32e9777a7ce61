// posttrainllm's WebAssembly engine for JavaScript: see engine.ts (the API), select.ts (which
// build to load) and worker.ts (running it in a Web Worker). docs/wasm.md has the details.
export * from './engine.js';
export { readSignatures, memory64Instantiator } from './memory64.js';
export * from './select.js';
export * from './worker.js';
