// The WGSL kernels for the browser: Vite inlines every file of web/webgpu/kernels at build time
// (includes under kernels/common too), and the executor asks for them by name.
import { kernelsFromMap, type KernelSource } from '../../../webgpu/src/kernels.js';

const files = import.meta.glob('../../../webgpu/kernels/**/*.wgsl', { query: '?raw', import: 'default', eager: true }) as Record<string, string>;

export function kernelSource(): KernelSource {
  return kernelsFromMap(files);
}
