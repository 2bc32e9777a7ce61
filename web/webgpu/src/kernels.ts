// WGSL kernel sources: one file per op under web/webgpu/kernels/, named like the C++ twin.
// A KernelSource returns the text of `<name>.wgsl` (name relative to the kernels folder, e.g.
// `gelu` or `common/erf`): in Node it reads the folder (node.ts), in a browser it comes from a
// map of file contents (kernelsFromMap, e.g. what Vite's import.meta.glob gives).
//
// Shared code: WGSL has no modules, so a kernel that needs a shared function says so with a line
// `// #include NAME`; `withIncludes` appends kernels/common/NAME.wgsl (each file once, includes
// of includes too). Appending keeps the kernel's own line numbers in compile errors right, and
// WGSL module-scope declarations may come in any order. The line is a comment, so the kernel file
// alone is still WGSL that parses (it just lacks the included functions). A variant of a kernel
// can have an include resolve to another common file (`aliases`, e.g. { reduce:
// 'reduce_subgroup' }): the kernel's text stays one. An included file that needs an extension
// says `enable NAME;` at its top, as WGSL wants; the loader moves the directive to the front of
// the kernel's first line (global directives precede every declaration), so line numbers hold.
//
// Compile-time specialisation: besides WGSL `override` constants (flags, set per pipeline), a
// kernel may declare `const NAME: u32 = <default>u;` for sizes that WGSL needs as true constants
// (private array lengths such as the attention head size). `specialise` replaces those
// declarations; the files stay valid WGSL with their defaults.

export type KernelSource = (name: string) => string;

const INCLUDE = /^\/\/ #include ([A-Za-z0-9_]+)\s*$/gm;
const ENABLE = /^enable +([A-Za-z0-9_, ]+?) *;.*$/gm;
const enableNames = (list: string) =>
  list
    .split(',')
    .map((n) => n.trim())
    .filter(Boolean);

// Include name -> the common file that stands in for it in one variant of a kernel.
export type IncludeAliases = Record<string, string>;

// The kernel's text followed by every common file it includes (transitively, each once).
export function withIncludes(name: string, kernels: KernelSource, aliases: IncludeAliases = {}): string {
  return sourceWithIncludes(name, kernels(name), kernels, aliases);
}

// The same for a kernel whose text is not a file (the generated linear_tiled, src/linear_gen.ts).
export function sourceWithIncludes(
  name: string,
  source: string,
  kernels: KernelSource,
  aliases: IncludeAliases = {},
): string {
  const seen = new Set<string>([name]);
  const parts: string[] = [source];
  const enables = new Set<string>();
  const visit = (text: string, file: string) => {
    for (const m of text.matchAll(INCLUDE)) {
      const inc = `common/${aliases[m[1]!] ?? m[1]}`;
      if (seen.has(inc)) continue;
      seen.add(inc);
      let body: string;
      try {
        body = kernels(inc);
      } catch (e) {
        throw new Error(`kernels/${file}.wgsl includes ${m[1]}: ${(e as Error).message}`, { cause: e });
      }
      body = body.replace(ENABLE, (_, names: string) => {
        for (const n of enableNames(names)) enables.add(n);
        return `// (enable ${names}: moved to the module's first line)`;
      });
      parts.push(`\n// ---- included from kernels/${inc}.wgsl ----\n${body}`);
      visit(body, inc);
    }
  };
  visit(source, name);
  const own = new Set([...source.matchAll(ENABLE)].flatMap((m) => enableNames(m[1]!)));
  const hoisted = [...enables].filter((n) => !own.has(n));
  if (hoisted.length > 0) parts[0] = `enable ${hoisted.join(', ')}; ${source}`;
  return parts.join('');
}

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

// A KernelSource over file contents keyed by path, e.g. in a Vite page:
//   kernelsFromMap(import.meta.glob('../webgpu/kernels/**/*.wgsl', { query: '?raw', import: 'default', eager: true }))
// A key resolves to the part after its last `kernels/` folder without `.wgsl` (`…/kernels/gelu.wgsl`
// -> `gelu`, `…/kernels/common/erf.wgsl` -> `common/erf`); a key without such a folder resolves
// by its base name. (The glob must include common/ — `**/*.wgsl` — for kernels that use #include.)
export function kernelsFromMap(files: Record<string, string>): KernelSource {
  const byName = new Map<string, string>();
  for (const [key, text] of Object.entries(files)) {
    if (typeof text !== 'string') throw new Error(`kernel file '${key}' is not text (import it with ?raw)`);
    const path = key.replace(/\\/g, '/').replace(/\?.*$/, '');
    if (!path.endsWith('.wgsl')) continue;
    const k = path.lastIndexOf('kernels/');
    const rel = (k >= 0 ? path.slice(k + 'kernels/'.length) : path.slice(path.lastIndexOf('/') + 1)).slice(
      0,
      -'.wgsl'.length,
    );
    if (byName.has(rel) && byName.get(rel) !== text) throw new Error(`two different kernel files resolve to '${rel}'`);
    byName.set(rel, text);
  }
  return (name: string) => {
    const s = byName.get(name);
    if (s === undefined)
      throw new Error(
        `no kernel file '${name}.wgsl' among the ${byName.size} given (${[...byName.keys()].slice(0, 8).join(', ')}${byName.size > 8 ? ', ...' : ''})`,
      );
    return s;
  };
}
