// Shared by the site's browser tests: the built site served (with or without cross-origin
// isolation) to a fresh headless Chromium with SwiftShader WebGPU, screenshots, native ptl.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { assertNoErrors, launchChromium, startServer } from '../../../tests/browser/lib/index.mjs';

export const SITE = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const ROOT = path.resolve(SITE, '../..');
export const DIST = path.join(SITE, 'dist');
/** Screenshots and downloads: test artifacts, kept after the run. */
export const OUT = process.env.PTL_SITE_TEST_OUT ?? path.join(ROOT, 'build-site-test');
export const PTL = process.env.PTL_NATIVE_BIN ?? path.join(ROOT, 'build/ptl');
fs.mkdirSync(OUT, { recursive: true });

export function ptl(args, opts = {}) {
  return execFileSync(PTL, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], ...opts });
}

export function corpusPath() {
  for (const d of [process.env.PTL_DATA_DIR, path.join(ROOT, '../shared/data')].filter(Boolean)) {
    const p = path.join(d, 'tinyshakespeare.txt');
    if (fs.existsSync(p)) return p;
  }
  throw new Error('tinyshakespeare.txt not found: set PTL_DATA_DIR');
}

/** Opens the site in Chromium. `ignore`: console messages that a test expects. */
export async function openSite({ isolated = true, route = '/', width = 1440, height = 1000, ignore = [] } = {}) {
  if (!fs.existsSync(path.join(DIST, 'index.html')))
    throw new Error(`${DIST} has no built site: run web/site/tests/run.sh`);
  const server = await startServer({ mounts: { '/': DIST }, isolated });
  let browser;
  try {
    browser = await launchChromium({ webgpu: true });
    const { page, errors } = await browser.newPage();
    await page.setViewportSize({ width, height });
    page.setDefaultTimeout(3 * 60 * 1000);
    await page.goto(server.url + route);
    const filtered = () => errors.filter((e) => !ignore.some((re) => re.test(e)));
    return {
      page,
      server,
      browser,
      errors,
      assertNoErrors: (what = route) => assertNoErrors(filtered(), what),
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

/** Waits until the playground has loaded its engine, its corpus and measured its speed. */
export async function waitReady(page) {
  await page.waitForFunction(() => document.body.dataset.ready === 'true', null, { timeout: 120000 });
}

/** Waits until no training or sampling runs and the run reached `step`. */
export async function waitIdleAt(page, step) {
  await page.waitForFunction(
    (s) => document.body.dataset.state === 'ready' && Number(document.body.dataset.step ?? 0) >= s,
    step,
  );
}

export async function shoot(page, name) {
  const file = path.join(OUT, `${name}.png`);
  await page.screenshot({ path: file, fullPage: true });
  return file;
}

/** Screenshots of the page at phone and desktop widths. */
export async function shootBoth(page, name) {
  for (const width of [390, 1440]) {
    await page.setViewportSize({ width, height: 900 });
    await page.waitForTimeout(150); // charts resize on the next frame
    await shoot(page, `${name}-${width}`);
  }
  await page.setViewportSize({ width: 1440, height: 1000 });
}

/** The losses the dashboard received, in order (window.ptlRun is the playground's test hook). */
export async function losses(page) {
  return page.evaluate(() => window.ptlRun?.losses ?? []);
}
