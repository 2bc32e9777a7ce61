// Shared by the engine's browser tests: where things are, and an engine page served with or
// without cross-origin isolation in a fresh headless Chromium.
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { assertNoErrors, launchChromium, startServer } from './lib/index.mjs';

export const HERE = path.dirname(fileURLToPath(import.meta.url));
export const ROOT = path.resolve(HERE, '../..');
/** The engine builds (build-wasm/<variant>/ptl_engine.*), as for tests/wasm. */
export const BUILD_DIR = process.env.PTL_WASM_BUILD_DIR ?? path.join(ROOT, 'build-wasm');
/** What run.sh builds for the browser: the classic worker bundle. */
export const BROWSER_OUT = process.env.PTL_BROWSER_OUT ?? path.join(ROOT, 'build-browser');

// Native fixtures and the data file come from the Node tests' helpers (same environment variables).
export * from '../wasm/helpers.mjs';
import { dataFile } from '../wasm/helpers.mjs';

/** The folders the engine page needs, by URL prefix. */
export function engineMounts() {
  return {
    '/': path.join(HERE, 'pages'),
    '/dist': path.join(ROOT, 'web', 'engine', 'dist'),
    '/bundle': BROWSER_OUT,
    '/wasm': BUILD_DIR,
    '/data': path.dirname(dataFile()),
  };
}

/**
 * A Chromium with the engine page open (window.ptlTest ready), served isolated (COOP/COEP) or not.
 * close() shuts page, browser and server.
 */
export async function openEnginePage({ isolated }) {
  const server = await startServer({ mounts: engineMounts(), isolated });
  let browser;
  try {
    browser = await launchChromium({ webgpu: false });
    const { page, errors } = await browser.newPage();
    page.setDefaultTimeout(10 * 60 * 1000);
    await page.goto(`${server.url}/engine.html`);
    await page.waitForFunction(() => window.ptlTestReady === true, null, { timeout: 30000 });
    return {
      page,
      errors,
      server,
      browser,
      assertNoErrors: () => assertNoErrors(errors, `the engine page (${isolated ? 'isolated' : 'not isolated'})`),
      close: async () => {
        await browser.close();
        await server.close();
      },
    };
  } catch (e) {
    await browser?.close();
    await server.close();
    throw e;
  }
}
