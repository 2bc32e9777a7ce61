// /runs: loss curves of several runs on one chart. A run is a metrics.jsonl (one JSON object per
// line: step, train_loss, val_loss, lr, grad_norm, tokens_per_s, elapsed_s) or a checkpoint,
// whose safetensors header carries loss_history: [[step, train_loss, val_loss | null], ...].
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';

export interface RunPoint {
  step: number;
  train?: number;
  val?: number;
  tokensPerS?: number;
}
export interface Run {
  name: string;
  points: RunPoint[];
}

export function parseMetrics(text: string, name: string): Run {
  const points = new Map<number, RunPoint>();
  text.split('\n').forEach((line, i) => {
    if (!line.trim()) return;
    let o: Record<string, unknown>;
    try {
      o = JSON.parse(line) as Record<string, unknown>;
    } catch {
      throw new Error(`${name}, line ${i + 1}: not JSON`);
    }
    if (typeof o['step'] !== 'number')
      throw new Error(`${name}, line ${i + 1}: no "step" number (is this a metrics.jsonl?)`);
    const p = points.get(o['step']) ?? { step: o['step'] };
    if (typeof o['train_loss'] === 'number') p.train = o['train_loss'];
    if (typeof o['loss'] === 'number') p.train = o['loss'];
    if (typeof o['val_loss'] === 'number') p.val = o['val_loss'];
    if (typeof o['tokens_per_s'] === 'number') p.tokensPerS = o['tokens_per_s'];
    points.set(p.step, p);
  });
  if (points.size === 0) throw new Error(`${name}: no metrics in the file`);
  return { name, points: [...points.values()].sort((a, b) => a.step - b.step) };
}

/** The loss_history rows of a checkpoint's header: [step, train | null, val | null]. */
export function checkpointHistoryRows(bytes: Uint8Array, name: string): [number, number | null, number | null][] {
  const notOne = `${name} is neither a metrics.jsonl nor a checkpoint`;
  if (bytes.length < 8) throw new Error(`${notOne} (${bytes.length} bytes: too short for a checkpoint's header)`);
  const n = Number(new DataView(bytes.buffer, bytes.byteOffset, 8).getBigUint64(0, true));
  if (n <= 0 || 8 + n > bytes.length)
    throw new Error(
      `${notOne} (read as a safetensors file, its header would be ${n.toLocaleString('en')} bytes long, and the file has ${bytes.length.toLocaleString('en')})`,
    );
  let header: Record<string, unknown> & { __metadata__?: Record<string, string> };
  try {
    header = JSON.parse(new TextDecoder().decode(bytes.subarray(8, 8 + n)));
  } catch {
    throw new Error(`${notOne} (its header is not JSON)`);
  }
  // The tensors end where the file should: a file cut short (an interrupted copy) is refused here
  // as the engine refuses it, rather than drawn as if whole.
  let end = 0;
  for (const [k, t] of Object.entries(header)) {
    if (k === '__metadata__') continue;
    const offs = (t as { data_offsets?: unknown }).data_offsets;
    if (Array.isArray(offs) && typeof offs[1] === 'number') end = Math.max(end, offs[1]);
  }
  if (8 + n + end > bytes.length)
    throw new Error(
      `${name}: the checkpoint is cut short (${bytes.length.toLocaleString('en')} bytes; its tensors end at byte ${(8 + n + end).toLocaleString('en')})`,
    );
  const hist = header.__metadata__?.['loss_history'];
  if (!hist) throw new Error(`${name}: the checkpoint has no loss history`);
  return JSON.parse(hist) as [number, number | null, number | null][];
}

export function parseCheckpointHistory(bytes: Uint8Array, name: string): Run {
  const rows = checkpointHistoryRows(bytes, name);
  const points = rows.map(([step, train, val]) => ({
    step,
    ...(train !== null ? { train } : {}),
    ...(val !== null && val !== undefined ? { val } : {}),
  }));
  if (points.length === 0) throw new Error(`${name}: the loss history is empty`);
  return { name, points };
}

const palette = ['#264653', '#e76f51', '#2a9d8f', '#8338ec', '#f4a261', '#1f6f8b', '#c1121f', '#6a994e'];

export function startRuns(): void {
  const input = document.getElementById('runs-files') as HTMLInputElement;
  const log = document.getElementById('runs-log') as HTMLInputElement;
  const status = document.getElementById('runs-status')!;
  const host = document.getElementById('runs-chart')!;
  const tbody = document.querySelector('#runs-table tbody')!;
  const runs: Run[] = [];
  let plot: uPlot | null = null;

  function draw(): void {
    plot?.destroy();
    host.replaceChildren();
    if (runs.length === 0) return;
    const steps = [...new Set(runs.flatMap((r) => r.points.map((p) => p.step)))].sort((a, b) => a - b);
    const index = new Map(steps.map((s, i) => [s, i]));
    const data: (number | null)[][] = [steps];
    const series: uPlot.Series[] = [{ label: 'step' }];
    runs.forEach((r, k) => {
      const color = palette[k % palette.length]!;
      const train: (number | null)[] = steps.map(() => null);
      const val: (number | null)[] = steps.map(() => null);
      for (const p of r.points) {
        if (p.train !== undefined) train[index.get(p.step)!] = p.train;
        if (p.val !== undefined) val[index.get(p.step)!] = p.val;
      }
      data.push(train, val);
      series.push({ label: `${r.name} train`, stroke: color, width: 1.5, spanGaps: true, points: { show: false } });
      series.push({
        label: `${r.name} val`,
        stroke: color,
        width: 1,
        dash: [5, 3],
        spanGaps: true,
        points: { show: true, size: 6, fill: color },
      });
    });
    plot = new uPlot(
      {
        width: Math.max(280, host.clientWidth),
        height: 360,
        scales: { x: { time: false }, y: log.checked ? { distr: 3 } : {} },
        series,
        axes: [
          { label: 'step', stroke: 'currentColor' },
          { label: 'loss', stroke: 'currentColor' },
        ],
      },
      data as uPlot.AlignedData,
      host,
    );
  }

  function table(): void {
    tbody.replaceChildren();
    runs.forEach((r, k) => {
      const tr = document.createElement('tr');
      // For tools and tests: the curve drawn runs from this step, with this many points.
      tr.dataset['firstStep'] = String(r.points[0]!.step);
      tr.dataset['points'] = String(r.points.length);
      const last = [...r.points].reverse().find((p) => p.train !== undefined)?.train;
      const vals = r.points.map((p) => p.val).filter((v): v is number => v !== undefined);
      const tps = r.points
        .map((p) => p.tokensPerS)
        .filter((v): v is number => v !== undefined)
        .sort((a, b) => a - b);
      const cells = [
        r.name,
        String(r.points.at(-1)!.step),
        last?.toFixed(4) ?? '–',
        vals.length ? Math.min(...vals).toFixed(4) : '–',
        tps.length ? Math.round(tps[tps.length >> 1]!).toLocaleString() : '–',
      ];
      cells.forEach((c, i) => {
        const td = document.createElement('td');
        td.textContent = c;
        if (i > 0) td.className = 'num';
        if (i === 0) td.style.color = palette[k % palette.length]!;
        tr.append(td);
      });
      const td = document.createElement('td');
      const b = document.createElement('button');
      b.type = 'button';
      b.className = 'secondary';
      b.textContent = 'Remove';
      b.setAttribute('aria-label', `Remove ${r.name}`);
      b.addEventListener('click', () => {
        runs.splice(runs.indexOf(r), 1);
        table();
        draw();
      });
      td.append(b);
      tr.append(td);
      tbody.append(tr);
    });
  }

  // Each file is read on its own: one that cannot be read is named in the status line, and the
  // runs already open (and the other files) stay.
  async function addFiles(files: File[]): Promise<void> {
    const errors: string[] = [];
    for (const f of files) {
      try {
        const bytes = new Uint8Array(await f.arrayBuffer());
        const isJson = /\.jsonl?$/i.test(f.name) || bytes[0] === 0x7b;
        const run = isJson
          ? parseMetrics(new TextDecoder().decode(bytes), f.name)
          : parseCheckpointHistory(bytes, f.name);
        // Every ptl run writes metrics.jsonl: number the repeats so that legend and table tell them apart.
        const same = runs.filter((r) => r.name === run.name || r.name.startsWith(`${run.name} (`)).length;
        if (same > 0) run.name = `${run.name} (${same + 1})`;
        runs.push(run);
      } catch (e) {
        errors.push(e instanceof Error ? e.message : String(e));
      }
    }
    const open = `${runs.length} run${runs.length === 1 ? '' : 's'} open.`;
    status.className = errors.length ? 'status error' : 'status ok';
    status.textContent = errors.length ? `Could not open: ${errors.join('; ')}. ${open}` : open;
    document.body.dataset['runs'] = String(runs.length);
    table();
    draw();
  }
  input.addEventListener('change', async () => {
    const files = [...(input.files ?? [])];
    input.value = '';
    await addFiles(files);
  });
  // Files dropped anywhere on the page open as "Files" does.
  document.addEventListener('dragover', (ev) => {
    if (ev.dataTransfer?.types.includes('Files')) ev.preventDefault();
  });
  document.addEventListener('drop', (ev) => {
    const files = [...(ev.dataTransfer?.files ?? [])];
    if (files.length === 0) return;
    ev.preventDefault();
    void addFiles(files);
  });
  log.addEventListener('change', draw);
  new ResizeObserver(() => plot?.setSize({ width: Math.max(280, host.clientWidth), height: 360 })).observe(host);
}
