// Node helpers: a WebGPU device from the npm package `webgpu` (Dawn) and kernels read from disk.
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { WebGPUBackend } from './executor.js';
import type { KernelSource } from './kernels.js';

export const KERNEL_DIR = join(dirname(fileURLToPath(import.meta.url)), '..', 'kernels');

export function kernelsFromDir(dir = KERNEL_DIR): KernelSource {
  const cache = new Map<string, string>();
  return (name: string) => {
    let s = cache.get(name);
    if (s === undefined) {
      try {
        s = readFileSync(join(dir, `${name}.wgsl`), 'utf8');
      } catch {
        throw new Error(`no kernel file ${join(dir, `${name}.wgsl`)}`);
      }
      cache.set(name, s);
    }
    return s;
  };
}

export interface NodeGPU {
  gpu: GPU; // keep it referenced: Dawn tears the instance down when it is garbage-collected
  backend: WebGPUBackend;
  adapter: GPUAdapter;
  device: GPUDevice;
  description: string;
}

// Creates a device through Dawn's Node binding. Needs a Vulkan driver; without a GPU, SwiftShader:
// VK_ICD_FILENAMES=/usr/lib/chromium/vk_swiftshader_icd.json (see docs/webgpu.md).
const instances: GPU[] = [];

export async function createNodeBackend(
  dawnOptions: string[] = [],
  backendOptions: ConstructorParameters<typeof WebGPUBackend>[2] = {},
): Promise<NodeGPU> {
  const mod = (await import('webgpu')) as unknown as {
    create: (opts: string[]) => GPU;
    globals: Record<string, unknown>;
  };
  Object.assign(globalThis, mod.globals);
  const gpu = mod.create(dawnOptions);
  const adapter = await gpu.requestAdapter({ powerPreference: 'high-performance' });
  if (!adapter)
    throw new Error(
      'no WebGPU adapter: install a Vulkan driver (libvulkan1) or set VK_ICD_FILENAMES to SwiftShader ' +
        '(/usr/lib/chromium/vk_swiftshader_icd.json from the chromium package)',
    );
  const device = await adapter.requestDevice({
    requiredLimits: WebGPUBackend.requiredLimits(adapter),
    requiredFeatures: WebGPUBackend.requiredFeatures(adapter),
  });
  const info = adapter.info;
  const description = [info.vendor, info.architecture, info.device, info.description].filter((x) => x).join(' ');
  instances.push(gpu);
  return { gpu, backend: new WebGPUBackend(device, kernelsFromDir(), backendOptions), adapter, device, description };
}
