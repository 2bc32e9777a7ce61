#!/usr/bin/env node
// The playground's memory over a long visit: a run trained for --minutes in headless Chromium
// (WebAssembly, as on a machine without a GPU), then fine-tuned with LoRA on a text the script
// makes and sampled, with the browser's memory read every --every-s seconds.
//
//   node bench/site_memory.mjs [--build] [--dist web/site/dist] [--minutes 30] [--every-s 30]
//                              [--steps 100000] [--ft-steps 100] [--dumps 3,15,29]
//                              [--autosave-every N] [--out FILE]
//
// Memory: the proportional set size (PSS, /proc/PID/smaps_rollup: shared pages split between
// the processes sharing them) summed over the Chromium instance's processes (the browser, its
// renderer with the page's workers and WebAssembly memory, the GPU and utility processes), read
// every --every-s seconds; at the end of each phase also the page's own JavaScript and
// WebAssembly memory as performance.measureUserAgentSpecificMemory() reports it (the page is
// cross-origin isolated; the call waits for a collection, about a minute while the page trains). The run's settings are the page's defaults but
// --steps, so that the schedule outlasts --minutes (the run is stopped then), and --autosave-every
// when given (0: no autosave).
// Prints one JSON line per reading {"kind": "sample", "phase": "train"|"stopped"|"finetuned"|
// "sampled", "t_s", "step", "pss_bytes", "pss_renderer_bytes", "js_bytes", "renderer_pss",
// "dom", "wasm_heap_bytes", "chart_rows"}: renderer_pss splits the renderer's PSS by mapping (anonymous, the
// heap, shared memory, files, stacks: /proc/PID/smaps), dom is the page's document, node and
// listener counts (DevTools' Memory.getDOMCounters), wasm_heap_bytes the engine's WebAssembly
// memory at the last validation, chart_rows the loss chart's rows (its train points are bounded:
// web/site/src/client/thin.ts). With --dumps (minutes, e.g. 3,15,29), a line {"kind": "dump",
// "t_s", "processes": {name: {allocator: bytes}}} at each of those minutes and at the end of each
// phase: Chromium's own accounting (memory-infra, as chrome://tracing shows it) of what each
// process's allocators hold (partition_alloc, malloc, v8, blink_gc, skia, cc, gpu, ...). Then the summary
// {"backend": "wasm-chromium", "preset", "minutes", "steps", "pss_warm_bytes", "pss_max_bytes",
//  "pss_end_bytes", "pss_growth", "pss_end_growth", "js_stopped_bytes", "pss_finetuned_bytes",
//  "js_finetuned_bytes", "pss_sampled_bytes", "js_sampled_bytes", "ft_steps", "chromium", "load_avg"}
// where warm is the median over the tenth of the training time after the first tenth (warm-up),
// end the median over the last tenth, growth = max / warm - 1 and end_growth = end / warm - 1.
// --out also writes the lines to FILE. docs/reliability.md, "Memory over long runs".
import fs from 'node:fs';
import os from 'node:os';

import { benchArgs } from './args.mjs';
import { openPlayground, resultLines } from './site_page.mjs';

const args = benchArgs(
  import.meta.url,
  ['dist', 'minutes', 'every-s', 'steps', 'ft-steps', 'dumps', 'autosave-every', 'out'],
  ['build'],
);
const fail = (msg) => {
  console.error(`bench/site_memory.mjs: ${msg}`);
  process.exit(2);
};
const positive = (key, dflt) => {
  const v = Number(args[key] ?? dflt);
  if (!(v > 0)) fail(`--${key}: a positive number, got ${args[key]}`);
  return v;
};
const minutes = positive('minutes', 30);
const everyS = positive('every-s', 30);
const steps = Math.round(positive('steps', 100000));
const ftSteps = Math.round(positive('ft-steps', 100));
const dumpMinutes = (args.dumps ?? '').split(',').filter(Boolean).map(Number);
if (dumpMinutes.some((m) => !(m >= 0 && m < minutes))) fail(`--dumps: minutes under --minutes, got ${args.dumps}`);

// The processes of one Chromium instance: the one started with its profile, and its descendants.
function processTree(profile) {
  const parent = new Map();
  let root = null;
  for (const d of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${d}/stat`, 'utf8');
      parent.set(Number(d), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]));
      if (root === null) {
        const cmd = fs.readFileSync(`/proc/${d}/cmdline`, 'utf8');
        if (cmd.includes(`--user-data-dir=${profile}`) && !cmd.includes('--type=')) root = Number(d);
      }
    } catch {
      // gone meanwhile
    }
  }
  if (root === null) return [];
  const tree = [root];
  for (let grew = true; grew;) {
    grew = false;
    for (const [pid, pp] of parent)
      if (tree.includes(pp) && !tree.includes(pid)) {
        tree.push(pid);
        grew = true;
      }
  }
  return tree;
}

// A process's PSS by kind of mapping (bytes): anonymous memory (PartitionAlloc, V8's heaps, the
// WebAssembly memory), the [heap], shared memory (memfd, /dev/shm: what goes to the GPU and
// browser processes), stacks, and files (libraries, fonts).
function pssByMapping(pid) {
  const kinds = { anon: 0, heap: 0, shared: 0, stack: 0, file: 0 };
  let kind = 'anon';
  for (const line of fs.readFileSync(`/proc/${pid}/smaps`, 'utf8').split('\n')) {
    const head = line.match(/^[0-9a-f]+-[0-9a-f]+ \S+ \S+ \S+ \d+\s*(.*)$/);
    if (head) {
      const name = head[1];
      if (name === '[heap]') kind = 'heap';
      else if (name.startsWith('[stack')) kind = 'stack';
      else if (/memfd:|\/dev\/shm|SYSV/.test(name)) kind = 'shared';
      else if (name.startsWith('/')) kind = 'file';
      else kind = 'anon'; // no name, [anon:...], [vdso] and the like
      continue;
    }
    const m = line.match(/^Pss:\s+(\d+) kB/);
    if (m) kinds[kind] += Number(m[1]) * 1024;
  }
  return kinds;
}

function pss(profile) {
  let total = 0;
  let renderer = 0;
  let rendererPid = null; // the largest renderer: the playground's (others: spare, extensions)
  let rendererMax = 0;
  for (const pid of processTree(profile)) {
    try {
      const m = fs.readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8').match(/^Pss:\s+(\d+) kB/m);
      const bytes = m ? Number(m[1]) * 1024 : 0;
      total += bytes;
      if (fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('--type=renderer')) {
        renderer += bytes;
        if (bytes > rendererMax) [rendererPid, rendererMax] = [pid, bytes];
      }
    } catch {
      // gone meanwhile
    }
  }
  let byMapping = null;
  try {
    if (rendererPid !== null) byMapping = pssByMapping(rendererPid);
  } catch {
    // gone meanwhile
  }
  return { total, renderer, byMapping };
}

// Chromium's memory-infra dump through the DevTools protocol: per process (by its name: Browser,
// Renderer, GPU Process, ...), the size each top-level allocator reports.
async function memoryDump(cdp) {
  const events = [];
  const onData = (e) => events.push(...e.value);
  cdp.on('Tracing.dataCollected', onData);
  const complete = new Promise((resolve) => cdp.once('Tracing.tracingComplete', resolve));
  await cdp.send('Tracing.start', {
    transferMode: 'ReportEvents',
    traceConfig: {
      includedCategories: ['disabled-by-default-memory-infra'],
      excludedCategories: ['*'],
      memoryDumpConfig: { triggers: [] },
    },
  });
  let ok;
  try {
    ok = (
      await cdp.send('Tracing.requestMemoryDump', {
        deterministic: true,
        levelOfDetail: 'detailed',
      })
    ).success;
  } finally {
    await cdp.send('Tracing.end');
    await complete;
    cdp.off('Tracing.dataCollected', onData);
  }
  const names = new Map();
  for (const ev of events)
    if (ev.ph === 'M' && ev.name === 'process_name') names.set(ev.pid, ev.args?.name ?? String(ev.pid));
  const processes = {};
  for (const ev of events) {
    const dumps = ev.ph === 'v' ? ev.args?.dumps : null;
    if (!dumps?.allocators) continue;
    let name = names.get(ev.pid);
    if (!name)
      try {
        // (The trace names the browser and the GPU process; the rest by their command line's --type.)
        const type = fs.readFileSync(`/proc/${ev.pid}/cmdline`, 'utf8').match(/--type=([\w-]+)/);
        name = type ? type[1] : String(ev.pid);
      } catch {
        name = String(ev.pid);
      }
    const key = processes[name] ? `${name} ${ev.pid}` : name;
    const row = {};
    for (const [allocator, d] of Object.entries(dumps.allocators)) {
      const size = d.attrs?.size?.value;
      if (allocator.includes('/') || size === undefined) continue; // top-level allocators only
      row[allocator] = parseInt(size, 16);
    }
    const rss = dumps.process_totals?.resident_set_bytes;
    if (rss !== undefined) row.resident_set = parseInt(rss, 16);
    processes[key] = Object.fromEntries(Object.entries(row).sort((a, b) => b[1] - a[1]));
  }
  return { ok, processes };
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? (s[(s.length - 1) >> 1] + s[s.length >> 1]) / 2 : null;
};

const { page, browser, close } = await openPlayground({
  name: 'bench/site_memory.mjs',
  dist: args.dist,
  build: args.build,
  chromiumArgs: ['--enable-blink-features=ForceEagerMeasureMemory'],
});
const out = resultLines();
const emit = out.emit;
const cdp = await page.context().newCDPSession(page);
const load = [os.loadavg()[0]];
try {
  const preset = await page.inputValue('#preset');
  if ((await page.evaluate(() => document.body.dataset.backend)) !== 'wasm')
    fail('the page did not choose WebAssembly');
  await page.evaluate(() => document.querySelectorAll('details').forEach((d) => (d.open = true)));
  await page.fill('#steps', String(steps), { timeout: 30000 });
  await page.fill('#sample-every', '0', { timeout: 30000 });
  if (args['autosave-every'] !== undefined) await page.fill('#autosave-every', String(args['autosave-every']));

  const t0 = Date.now();
  const samples = [];
  // measureUserAgentSpecificMemory waits for a garbage collection and takes about a minute
  // while the page trains: read at the end of each phase only (js: true), not during training.
  const read = async (phase, js = false) => {
    const m = pss(browser.profile);
    const page_ = await page.evaluate(async (js) => {
      let bytes = null;
      try {
        if (js && self.crossOriginIsolated) bytes = (await performance.measureUserAgentSpecificMemory()).bytes;
      } catch {
        bytes = null;
      }
      return {
        js: bytes,
        step: window.ptlRun.losses.length,
        heap: window.ptlRun.evalLog.at(-1)?.heapBytes ?? null,
        chart: window.ptlRun.chartSteps().length,
      };
    }, js);
    const dom = await cdp.send('Memory.getDOMCounters');
    const row = {
      kind: 'sample',
      phase,
      t_s: +((Date.now() - t0) / 1000).toFixed(1),
      step: page_.step,
      pss_bytes: m.total,
      pss_renderer_bytes: m.renderer,
      js_bytes: page_.js,
      renderer_pss: m.byMapping,
      dom: {
        documents: dom.documents,
        nodes: dom.nodes,
        listeners: dom.jsEventListeners,
      },
      wasm_heap_bytes: page_.heap,
      chart_rows: page_.chart,
    };
    samples.push(row);
    emit(row);
    return row;
  };
  const dump = async (phase) => {
    const d = await memoryDump(cdp);
    emit({
      kind: 'dump',
      phase,
      t_s: +((Date.now() - t0) / 1000).toFixed(1),
      ...d,
    });
  };

  await page.click('#start');
  await page.waitForFunction(() => document.body.dataset.state === 'training');
  const end = t0 + minutes * 60 * 1000;
  while (Date.now() < end) {
    await new Promise((r) => setTimeout(r, Math.min(everyS * 1000, Math.max(0, end - Date.now()))));
    const state = await page.evaluate(() => document.body.dataset.state);
    if (state !== 'training') fail(`the run ended before ${minutes} minutes: ${await page.textContent('#status')}`);
    await read('train');
    while (dumpMinutes.length && Date.now() - t0 >= dumpMinutes[0] * 60 * 1000) {
      dumpMinutes.shift();
      await dump('train');
    }
  }
  await page.click('#stop');
  await page.waitForFunction(() => document.body.dataset.state !== 'training');
  await read('stopped', true);
  if (args.dumps) await dump('stopped');

  // LoRA on the run just trained, with a text unlike Shakespeare.
  const text = Array.from({ length: 1500 }, (_, i) => `the ${['cat', 'dog', 'owl'][i % 3]} sat on the mat. `).join(
    '\n',
  );
  await page.setInputFiles('#ft-file', {
    name: 'style.txt',
    mimeType: 'text/plain',
    buffer: Buffer.from(text),
  });
  await page.fill('#ft-steps', String(ftSteps), { timeout: 30000 });
  await page.click('#ft-start');
  await page.waitForFunction(() => document.body.dataset.ft === 'training');
  await page.waitForFunction(() => document.body.dataset.ft !== 'training', null, { timeout: 20 * 60 * 1000 });
  const ftStatus = await page.textContent('#ft-status');
  if (!/^Fine-tuned/.test(ftStatus)) fail(`fine-tuning did not finish: ${ftStatus}`);
  const finetuned = await read('finetuned', true);
  if (args.dumps) await dump('finetuned');

  await page.fill('#length', '400', { timeout: 30000 });
  await page.click('#generate');
  await page.waitForFunction(
    () =>
      document.body.dataset.state === 'ready' && document.getElementById('gen-stats').textContent.includes('tokens/s'),
  );
  const sampled = await read('sampled', true);
  if (args.dumps) await dump('sampled');
  load.push(os.loadavg()[0]);

  const train = samples.filter((s) => s.phase === 'train');
  const span = minutes * 60;
  const warm = train.filter((s) => s.t_s >= 0.1 * span && s.t_s < 0.2 * span);
  const after = train.filter((s) => s.t_s >= 0.1 * span);
  const last = train.filter((s) => s.t_s >= 0.9 * span);
  const pick = (rows, k) => median(rows.map((r) => r[k]).filter((v) => v !== null));
  const pssWarm = pick(warm, 'pss_bytes');
  const pssEnd = pick(last, 'pss_bytes');
  const pssMax = Math.max(...after.map((s) => s.pss_bytes));
  const stopped = samples.find((s) => s.phase === 'stopped');
  const ratio = (a, b) => (a !== null && b ? +(a / b - 1).toFixed(5) : null);
  emit({
    backend: 'wasm-chromium',
    preset,
    minutes,
    steps: train.at(-1)?.step ?? 0,
    pss_warm_bytes: pssWarm,
    pss_max_bytes: pssMax,
    pss_end_bytes: pssEnd,
    pss_growth: ratio(pssMax, pssWarm),
    pss_end_growth: ratio(pssEnd, pssWarm),
    js_stopped_bytes: stopped.js_bytes,
    pss_finetuned_bytes: finetuned.pss_bytes,
    js_finetuned_bytes: finetuned.js_bytes,
    pss_sampled_bytes: sampled.pss_bytes,
    js_sampled_bytes: sampled.js_bytes,
    ft_steps: ftSteps,
    chromium: browser.version(),
    load_avg: load.map((x) => +x.toFixed(2)),
  });
} finally {
  await close();
}
out.write(args.out);
