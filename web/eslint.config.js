// ESLint (flat config) for the TypeScript and JavaScript of web/, tests/browser, tests/wasm,
// tests/tokenizer and bench/*.mjs: `npm --prefix web run lint` (it runs from the
// repository root with this file, so the paths below are relative to the repository root).
import js from '@eslint/js';
import globals from 'globals';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  {
    ignores: ['**/node_modules/', '**/dist/', 'web/site/.astro/', 'web/site/public/', 'web/site/src/generated/'],
  },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    linterOptions: { reportUnusedDisableDirectives: 'error' },
    rules: {
      // `_`-prefixed names are deliberately unused (callbacks' positional parameters).
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none', ignoreRestSiblings: true },
      ],
    },
  },
  {
    // Node scripts and tests (ES modules).
    files: ['**/*.mjs', 'web/**/*.config.js', 'web/**/*.config.mjs', 'web/site/scripts/**'],
    languageOptions: { globals: { ...globals.node } },
  },
  {
    // Node scripts on Dawn (the npm package `webgpu` installs the WebGPU globals).
    files: ['bench/webgpu_*.mjs', 'web/webgpu/test/**/*.mjs'],
    languageOptions: { globals: { GPUBufferUsage: 'readonly', GPUMapMode: 'readonly', GPUShaderStage: 'readonly' } },
  },
  {
    // Browser tests: the functions they pass to page.evaluate run in the page.
    files: [
      'tests/browser/**/*.mjs',
      'web/site/tests/**/*.mjs',
      'bench/wasm.mjs',
      'bench/site_default_run.mjs',
      'bench/site_memory.mjs',
      'bench/site_page.mjs',
    ],
    languageOptions: { globals: { ...globals.browser } },
  },
  {
    // The browser code: pages, workers, the engine's and the WebGPU backend's TypeScript (which
    // also run in Node, through guarded branches).
    files: ['web/**/*.ts', 'tests/browser/pages/**/*.js'],
    languageOptions: { globals: { ...globals.browser, ...globals.worker } },
  },
);
