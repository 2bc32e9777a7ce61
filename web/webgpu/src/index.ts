export { WebGPUBackend, Executor, WebGPUError, asTyped, adamwConstants, type GPUTensor } from './executor.js';
export { WebGPUTrainer, type StepLoss, type TrainerOptions } from './trainer.js';
export { decodeSafeTensors, encodeSafeTensors, type SafeTensorsFile, type StTensor } from './safetensors.js';
export { parseProgram, numel, type ProgramJSON, type TensorInfo, type OpInfo } from './program.js';
export { specialise, type KernelSource } from './kernels.js';
