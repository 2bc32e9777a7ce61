// Headless Chromium for tests, through playwright-core and the system's Chromium (Debian
// `chromium`, /usr/bin/chromium): never a downloaded browser.
//
//   import { launchChromium } from "./lib/chromium.mjs";
//   const browser = await launchChromium();            // fresh profile, WebGPU on SwiftShader
//   const { page, errors } = await browser.newPage();  // errors: console errors, page errors, failed loads
//   await page.goto(url);
//   ...
//   assert.deepEqual(errors, []);
//   await browser.close();                             // also deletes the profile
//
// The flags are those of ../shared/notes/toolchain.md (headless WebGPU on SwiftShader without a
// GPU). Environment: PTL_CHROMIUM (default /usr/bin/chromium), PTL_CHROMIUM_ARGS (extra flags,
// space separated), PTL_BROWSER_HEADED=1 (a visible window, for debugging on a desktop).
import fs from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';

// playwright-core is a dev dependency of the npm workspace root web/ (tests/browser is not a
// package: npm installs no dependencies of a workspace outside its root), so it is loaded from there.
const { chromium } = createRequire(new URL('../../../web/package.json', import.meta.url))('playwright-core');

export const CHROMIUM = process.env.PTL_CHROMIUM ?? '/usr/bin/chromium';

/** Flags for every launch (headless and --no-sandbox are added by Playwright). */
export const BASE_ARGS = [
  '--disable-gpu-sandbox',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
  '--no-default-browser-check',
];
/** WebGPU without a GPU: Dawn on SwiftShader's Vulkan (correct, slow). */
export const WEBGPU_ARGS = [
  '--enable-unsafe-webgpu',
  '--enable-features=Vulkan',
  '--use-vulkan=swiftshader',
  '--use-webgpu-adapter=swiftshader',
];

/**
 * Launches Chromium with a fresh, empty user-data-dir.
 * @param {object} [options]
 * @param {boolean} [options.webgpu=true] add the SwiftShader WebGPU flags
 * @param {string[]} [options.args] more flags
 * @param {number} [options.timeout=60000] launch timeout in ms
 */
export async function launchChromium({ webgpu = true, args = [], timeout = 60000 } = {}) {
  if (!fs.existsSync(CHROMIUM))
    throw new Error(
      `Chromium not found at ${CHROMIUM}: install Debian's chromium (apt-get install -y chromium) or set PTL_CHROMIUM`,
    );
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'ptl-chromium-'));
  const extra = (process.env.PTL_CHROMIUM_ARGS ?? '').split(/\s+/).filter(Boolean);
  let context;
  try {
    context = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM,
      headless: process.env.PTL_BROWSER_HEADED !== '1',
      args: [...BASE_ARGS, ...(webgpu ? WEBGPU_ARGS : []), ...args, ...extra],
      timeout,
    });
  } catch (e) {
    fs.rmSync(profile, { recursive: true, force: true });
    throw new Error(`could not start Chromium (${CHROMIUM}): ${e instanceof Error ? e.message : String(e)}`, {
      cause: e,
    });
  }
  // A persistent context opens with one blank page; tests open their own.
  for (const p of context.pages()) await p.close().catch(() => {});

  return {
    context,
    profile,
    /** The browser's version string, e.g. "156.0.8078.114". */
    version: () => context.browser()?.version() ?? 'unknown',
    /** A new page whose console errors, uncaught errors, crashes and failed requests are collected. */
    async newPage() {
      const page = await context.newPage();
      return { page, errors: watchPage(page) };
    },
    async close() {
      await context.close().catch(() => {});
      fs.rmSync(profile, { recursive: true, force: true });
    },
  };
}

/**
 * Collects what should never happen on a healthy page: console.error (page and its workers),
 * uncaught exceptions, a crashed renderer, failed requests and HTTP errors. Returns the live array.
 * @param {import("playwright-core").Page} page
 * @param {{ignore?: RegExp[]}} [options] messages to leave out (expected errors)
 */
export function watchPage(page, { ignore = [] } = {}) {
  const errors = [];
  const add = (msg) => {
    if (!ignore.some((re) => re.test(msg))) errors.push(msg);
  };
  const onConsole = (where) => (msg) => {
    if (msg.type() === 'error') add(`${where} console.error: ${msg.text()}`);
  };
  page.on('console', onConsole('page'));
  page.on('worker', (worker) => worker.on('console', onConsole(`worker ${worker.url()}`)));
  page.on('pageerror', (e) => add(`uncaught: ${e.message}`));
  page.on('crash', () => add('the page crashed'));
  page.on('requestfailed', (r) => add(`request failed: ${r.url()} (${r.failure()?.errorText ?? '?'})`));
  page.on('response', (r) => {
    if (r.status() >= 400) add(`HTTP ${r.status()}: ${r.url()}`);
  });
  return errors;
}

/** Fails with every collected error listed. */
export function assertNoErrors(errors, what = 'the page') {
  const unique = [...new Set(errors)];
  if (unique.length) throw new Error(`${what} reported ${unique.length} error(s):\n  ${unique.join('\n  ')}`);
}
