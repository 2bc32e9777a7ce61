export {
  WebGPUBackend,
  Executor,
  WebGPUError,
  asTyped,
  adamwConstants,
  type GPUTensor,
  type BackendOptions,
} from './executor.js';
export { dropoutKey, dropoutStream, dropoutAttrs } from './dropout.js';
export { WebGPUTrainer, type StepLoss, type TrainerOptions } from './trainer.js';
export { WebGPUGenerator, Sampler, Rng, rngFor, type SamplingOptions, type GenerateOptions } from './generate.js';
export { WebGPUInspector, type Inspection } from './inspect.js';
export {
  kernelCases,
  runKernelCase,
  runKernelChecks,
  summariseChecks,
  describeResult,
  caseProgram,
  caseRng,
  compare,
  TOL,
  type Reference,
  type KernelCase,
  type CaseResult,
  type TensorSpec,
  type Tolerance,
} from './checks.js';
export { decodeSafeTensors, encodeSafeTensors, type SafeTensorsFile, type StTensor } from './safetensors.js';
export { parseProgram, numel, type ProgramJSON, type TensorInfo, type OpInfo } from './program.js';
export { planMemory, bufferBytes, type MemoryPlan } from './memory.js';
export {
  specialise,
  withIncludes,
  sourceWithIncludes,
  kernelsFromMap,
  type KernelSource,
  type IncludeAliases,
} from './kernels.js';
export { linearTiledSource, parseTiled, tiledName, TILED_DEFAULT, type TiledConfig } from './linear_gen.js';
export { engineTensors, copyToEngine, type EngineState } from './engine-link.js';
