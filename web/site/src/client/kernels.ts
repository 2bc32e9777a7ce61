// The WGSL kernels for the browser: Vite inlines every file of the WebGPU package's kernels/ at
// build time (includes under kernels/common too), and the executor asks for them by name.
// (`@posttrainllm/webgpu/kernels` is an alias of that folder: astro.config.mjs.)
import { kernelsFromMap, type KernelSource } from '@posttrainllm/webgpu';

const files = import.meta.glob('@posttrainllm/webgpu/kernels/**/*.wgsl', {
  query: '?raw',
  import: 'default',
  eager: true,
}) as Record<string, string>;

export function kernelSource(): KernelSource {
  return kernelsFromMap(files);
}
