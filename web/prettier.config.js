// Prettier for the TypeScript, JavaScript and CSS of web/, tests/browser, tests/wasm and
// bench/*.mjs (`npm --prefix web run format`, `format:check`; they run from the repository root
// with this file). Markup (.astro, .html) and prose (.md) keep their hand layout: .prettierignore.
/** @type {import("prettier").Config} */
export default {
  printWidth: 120,
  singleQuote: true,
  trailingComma: 'all',
};
