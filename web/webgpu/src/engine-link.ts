// The bridge between the WebAssembly engine (@posttrainllm/engine) and a GPU that trains its
// model: the engine owns the model's state (initialisation, data order, schedule, history,
// checkpoints); the GPU holds a copy while it trains, and writes it back before the engine reads
// the weights (validation, samples, saving). Typed by the few engine methods it calls, so that this
// package needs no dependency on the engine's.
import { type WebGPUBackend, WebGPUError } from './executor.js';

/** The parts of an engine (@posttrainllm/engine's Engine) that hold the model's state. */
export interface EngineState {
  tensorNames(): { name: string; shape: number[]; present: boolean }[];
  readTensor(name: string): Float32Array;
  writeTensor(name: string, data: Float32Array | Uint8Array): void;
  setStep(step: number): void;
}

/** The engine's state tensors as they are now (parameters, adapters, AdamW moments once present), for a GPU to load. */
export function engineTensors(e: EngineState): { name: string; shape: number[]; data: Float32Array }[] {
  return e
    .tensorNames()
    .filter((t) => t.present)
    .map((t) => ({ name: t.name, shape: t.shape, data: e.readTensor(t.name) }));
}

/**
 * Writes what a GPU's training changed back into the engine, tensor by tensor: the trainable
 * parameters (those with AdamW moments: every parameter, or only the LoRA adapters) and their
 * moments, then the GPU's step count. Every trainable parameter must be on the GPU; moments the
 * GPU has not made yet (no step ran there) stay as they are.
 */
export async function copyToEngine(e: EngineState, be: WebGPUBackend, step: number): Promise<void> {
  const names = e.tensorNames().map((t) => t.name);
  const all = new Set(names);
  const trained = names.filter((n) => n.startsWith('optim.') || all.has(`optim.m.${n}`));
  const missing = trained.find((n) => !n.startsWith('optim.') && !be.store.has(n));
  if (missing) throw new WebGPUError(`tensor '${missing}' is not on the GPU`);
  const onGpu = trained.filter((n) => be.store.has(n));
  const data = await be.read(onGpu.map((n) => be.store.get(n)!));
  for (const n of onGpu) e.writeTensor(n, data.get(n) as Float32Array);
  e.setStep(step);
}
