// Prettier for the TypeScript, JavaScript and Astro of web/, tests/browser, tests/wasm and
// bench/*.mjs (`npm --prefix web run format`, `format:check`). The repository's C++ has
// .clang-format; this file is the same kind of rule for the browser side.
// The plugin is imported here rather than named: prettier runs from the repository root, where a
// plugin name would not resolve (web/node_modules holds it).
import * as astro from 'prettier-plugin-astro';

/** @type {import("prettier").Config} */
export default {
  printWidth: 120,
  singleQuote: true,
  trailingComma: 'all',
  plugins: [astro],
  overrides: [{ files: '*.astro', options: { parser: 'astro' } }],
};
