#!/usr/bin/env node
// The playground's default run, timed: how long the site's default settings take to reach a
// validation loss, trained on WebAssembly in headless Chromium as a visitor's first run would be.
//
//   node bench/site_default_run.mjs [--build] [--dist web/site/dist] [--targets 2.0,1.75]
//                                   [--max-s 330] [--preset NAME] [--steps N] [--lr X] [--batch N]
//                                   [--eval-every N] [--out FILE]
//
// Serves the built site (--build builds it first: npm --prefix web/site run build) with
// cross-origin isolation to a fresh headless Chromium without WebGPU, so that Auto runs the
// threaded WebAssembly build, as on a machine without a GPU. It waits until the page is ready
// (engine, corpus, speed measured), changes only the settings given (--preset, --steps, --lr,
// --batch, --eval-every; none: the defaults as the page shows them), presses "Start new run", and reads
// the validation losses the page reports (its window.ptlRun hook). It stops once the lowest
// target is reached or after --max-s seconds, and prints one JSON line per target:
//   {"backend": "wasm-chromium", "preset", "params", "target_loss", "seconds", "train_seconds",
//    "steps", "tokens", "val_loss", "schedule_steps", "lr", "schedule", "dropout", "batch",
//    "threads", "variant", "eval_every", "chromium", "load_avg"}
// seconds: wall time from the press of Start to the validation at or below the target (model
// creation, validations, samples and autosaves included: what the visitor waits); train_seconds:
// the engine's training time at that step (the steps only). A target not reached gives
// "seconds": null and the last validation loss. Then one line {"kind": "evals", "points":
// [[step, val_loss, seconds], ...]} with every validation. load_avg: the host's 1-minute load
// average at the start and the end (this benchmark is sensitive to other work on the machine).
// --out also writes the lines to FILE.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { benchArgs } from './args.mjs';
import { ROOT, openPlayground, resultLines } from './site_page.mjs';

const args = benchArgs(
  import.meta.url,
  ['dist', 'targets', 'max-s', 'steps', 'lr', 'batch', 'preset', 'eval-every', 'out'],
  ['build'],
);
const fail = (msg) => {
  console.error(`bench/site_default_run.mjs: ${msg}`);
  process.exit(2);
};
const targets = (args.targets ?? '2.0,1.75')
  .split(',')
  .map(Number)
  .sort((a, b) => b - a);
if (!targets.length || targets.some((t) => !(t > 0))) fail(`--targets: positive numbers, got ${args.targets}`);
const maxS = Number(args['max-s'] ?? 330);
if (!(maxS > 0)) fail(`--max-s: a positive number of seconds, got ${args['max-s']}`);

const presets = JSON.parse(fs.readFileSync(path.join(ROOT, 'web/site/src/generated/presets.json'), 'utf8'));

const { page, browser, close } = await openPlayground({
  name: 'bench/site_default_run.mjs',
  dist: args.dist,
  build: args.build,
});
const out = resultLines();
const emit = out.emit;
const load = [os.loadavg()[0]];
try {
  if (args.preset) {
    await page.selectOption('#preset', args.preset);
    await page.waitForFunction(() => document.body.dataset.state === 'empty');
  }
  if (args['eval-every']) {
    await page.evaluate(() => document.querySelectorAll('details').forEach((d) => (d.open = true)));
    await page.fill('#eval-every', String(args['eval-every']));
  }
  if (args.steps) await page.fill('#steps', String(args.steps));
  if (args.lr) await page.fill('#lr', String(args.lr));
  if (args.batch) await page.fill('#batch', String(args.batch));
  const run = await page.evaluate(() => {
    const v = (id) => document.getElementById(id).value;
    return {
      preset: v('preset'),
      schedule_steps: Number(v('steps')),
      lr: Number(v('lr')),
      schedule: v('schedule'),
      dropout: Number(v('dropout')),
      batch: Number(v('batch')),
      eval_every: Number(v('eval-every')),
      backend: document.body.dataset.backend,
      variant: document.body.dataset.variant,
      threads: Number(document.body.dataset.threads),
    };
  });
  if (run.backend !== 'wasm') fail(`the page chose ${run.backend}, not WebAssembly`);
  const p = presets.find((x) => x.name === run.preset);
  const common = {
    backend: 'wasm-chromium',
    preset: run.preset,
    params: p.parameters,
    schedule_steps: run.schedule_steps,
    lr: run.lr,
    schedule: run.schedule,
    dropout: run.dropout,
    batch: run.batch,
    threads: run.threads,
    variant: run.variant,
    eval_every: run.eval_every,
    chromium: browser.version(),
  };
  await page.click('#start');
  const t0 = Date.now();
  let evals = [];
  let started = 0;
  const reached = new Map();
  for (;;) {
    await new Promise((r) => setTimeout(r, 2000));
    const now = await page.evaluate(() => ({
      log: window.ptlRun.evalLog,
      started: window.ptlRun.started.at(-1),
      state: document.body.dataset.state,
      status: document.getElementById('status').textContent,
    }));
    started = now.started;
    evals = now.log;
    for (const t of targets)
      if (!reached.has(t)) {
        const e = evals.find((x) => x.loss <= t);
        if (e) reached.set(t, e);
      }
    if (reached.has(targets.at(-1))) break;
    if ((Date.now() - t0) / 1000 > maxS) break;
    if (now.state !== 'training') {
      if (/stopped|failed/i.test(now.status)) fail(`the run ended: ${now.status}`);
      break; // finished its schedule
    }
  }
  if (await page.isEnabled('#stop')) await page.click('#stop');
  load.push(os.loadavg()[0]);
  const last = evals.at(-1);
  for (const t of targets) {
    const e = reached.get(t);
    emit({
      ...common,
      target_loss: t,
      seconds: e ? +((e.pageMs - started) / 1000).toFixed(1) : null,
      train_seconds: e ? +e.trainSeconds.toFixed(1) : null,
      steps: e ? e.step : null,
      tokens: e ? e.step * run.batch * p.model.ctx : null,
      val_loss: e ? +e.loss.toFixed(4) : last ? +last.loss.toFixed(4) : null,
      load_avg: load.map((x) => +x.toFixed(2)),
    });
  }
  emit({
    kind: 'evals',
    ...common,
    points: evals.map((e) => [e.step, +e.loss.toFixed(4), +((e.pageMs - started) / 1000).toFixed(1)]),
  });
} finally {
  await close();
}
out.write(args.out);
