// Prettier for the TypeScript, JavaScript and Astro of web/, tests/browser, tests/wasm and
// bench/*.mjs (`npm --prefix web run format`, `format:check`). The repository's C++ has
// .clang-format; this file is the same kind of rule for the browser side.
/** @type {import("prettier").Config} */
export default {
  printWidth: 120,
  singleQuote: true,
  trailingComma: 'all',
  plugins: ['prettier-plugin-astro'],
  overrides: [{ files: '*.astro', options: { parser: 'astro' } }],
};
