// The playground for the Node bench scripts (site_default_run.mjs, site_memory.mjs): the built
// site copied aside (a rebuild during the run changes nothing under the page) and served with
// cross-origin isolation to a fresh headless Chromium without WebGPU, so that Auto runs the
// threaded WebAssembly build, as on a machine without a GPU; a page opened on it and waited for
// until ready (engine, corpus, speed measured).
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { launchChromium, startServer } from '../tests/browser/lib/index.mjs';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

// name: the script's, for messages; dist: the built site (default web/site/dist); build: build
// it first (npm --prefix web/site run build); chromiumArgs: more flags for Chromium.
export async function openPlayground({ name, dist, build = false, chromiumArgs = [] }) {
  const site = path.resolve(dist ?? path.join(ROOT, 'web/site/dist'));
  if (build) {
    console.error(`${name}: building the site…`);
    execFileSync('npm', ['--prefix', path.join(ROOT, 'web/site'), 'run', '--silent', 'build'], {
      stdio: ['ignore', 'ignore', 'inherit'],
    });
  }
  if (!fs.existsSync(path.join(site, 'index.html'))) {
    console.error(`${name}: ${site} has no built site: pass --build`);
    process.exit(2);
  }
  const served = fs.mkdtempSync(path.join(os.tmpdir(), 'ptl-site-bench-'));
  fs.cpSync(site, served, { recursive: true });
  const server = await startServer({ mounts: { '/': served }, isolated: true });
  const browser = await launchChromium({ webgpu: false, args: chromiumArgs });
  const close = async () => {
    await browser.close();
    await server.close();
    fs.rmSync(served, { recursive: true, force: true });
  };
  try {
    const { page } = await browser.newPage();
    page.setDefaultTimeout(10 * 60 * 1000);
    await page.goto(server.url + '/');
    await page.waitForFunction(() => document.body.dataset.ready === 'true', null, { timeout: 180000 });
    return { page, browser, close };
  } catch (e) {
    await close();
    throw e;
  }
}

// JSON lines printed as they come and, with `write(file)`, written together at the end.
export function resultLines() {
  const lines = [];
  return {
    emit(row) {
      const line = JSON.stringify(row);
      lines.push(line);
      console.log(line);
    },
    write(file) {
      if (file) fs.writeFileSync(file, lines.join('\n') + '\n');
    },
  };
}
