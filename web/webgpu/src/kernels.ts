// WGSL kernel sources: one file per op under web/webgpu/kernels/, named like the C++ twin.
// A KernelSource returns the text of `<name>.wgsl`; in Node it reads the folder (node.ts), in a
// browser a bundler can inline the files.
//
// Compile-time specialisation: besides WGSL `override` constants (flags, set per pipeline), a
// kernel may declare `const NAME: u32 = <default>u;` for sizes that WGSL needs as true constants
// (private array lengths such as the attention head size). `specialise` replaces those
// declarations; the files stay valid WGSL with their defaults.

export type KernelSource = (name: string) => string;

export function specialise(source: string, defines: Record<string, number>): string {
  let out = source;
  for (const [name, value] of Object.entries(defines)) {
    if (!Number.isInteger(value) || value < 0) throw new Error(`define ${name} must be a non-negative integer`);
    const re = new RegExp(`const ${name}: u32 = \\d+u;`);
    if (!re.test(out)) throw new Error(`kernel has no 'const ${name}: u32 = ...u;' to specialise`);
    out = out.replace(re, `const ${name}: u32 = ${value}u;`);
  }
  return out;
}
