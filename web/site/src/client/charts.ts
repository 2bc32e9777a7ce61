// The live dashboard's charts (uPlot): loss with validation points, throughput, learning rate
// and gradient norm. Each chart keeps its own columns and redraws at most once per frame; a long
// run's curves keep a bounded number of steps (thin.ts).
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';

import { DRAWN_STEPS, pushThinned, thinning } from './thin.js';

type Columns = number[][];

class Chart {
  readonly plot: uPlot;
  private readonly data: Columns;
  private queued = false;

  constructor(el: HTMLElement, opts: Omit<uPlot.Options, 'width' | 'height'>, columns: number) {
    this.data = Array.from({ length: columns }, () => []);
    this.plot = new uPlot(
      { ...opts, scales: { x: { time: false }, ...opts.scales }, width: Math.max(260, el.clientWidth), height: 220 },
      this.data as uPlot.AlignedData,
      el,
    );
    new ResizeObserver(() => this.plot.setSize({ width: Math.max(260, el.clientWidth), height: 220 })).observe(el);
  }

  push(row: (number | null)[]): void {
    row.forEach((v, i) => (this.data[i] as (number | null)[]).push(v));
    this.redraw();
  }

  /** Replaces the last row (the curve's newest point moved on: thin.ts). */
  replaceLast(row: readonly (number | null)[]): void {
    row.forEach((v, i) => ((this.data[i] as (number | null)[])[this.data[i]!.length - 1] = v));
    this.redraw();
  }

  reset(): void {
    for (const c of this.data) c.length = 0;
    this.redraw();
  }

  redraw(): void {
    if (this.queued) return;
    this.queued = true;
    requestAnimationFrame(() => {
      this.queued = false;
      this.plot.setData(this.data as uPlot.AlignedData);
      // uPlot keeps the last range when there is no data: an emptied chart would show the
      // previous run's steps (after opening a checkpoint, which has no speed or lr to draw).
      if (this.data[0]!.length === 0) this.plot.setScale('x', { min: 0, max: 1 });
    });
  }
}

const axis = (label: string): uPlot.Axis => ({
  label,
  stroke: 'currentColor',
  grid: { stroke: 'rgba(128,128,128,0.2)' },
  ticks: { stroke: 'rgba(128,128,128,0.4)' },
});

// 80,000 -> "80k": uPlot's own tick labels ("80,000") are wider than its default axis and ran
// into the rotated axis label of the tokens/s chart.
export const compactNumber = (v: number): string => {
  const a = Math.abs(v);
  if (a >= 1e6) return `${+(v / 1e6).toFixed(1)}M`;
  if (a >= 1e3) return `${+(v / 1e3).toFixed(1)}k`;
  return `${+v.toFixed(2)}`;
};

export class Dashboard {
  private loss: Chart;
  private readonly speed: Chart;
  private readonly lr: Chart;
  private readonly norm: Chart;
  private logScale = false;
  private readonly lossEl: HTMLElement;
  // The model's vocabulary: the loss is per byte (256) or per token, and an untrained model's is
  // ln(vocabulary), a uniform guess.
  private vocab = 256;
  private get untrained(): number {
    return Math.log(this.vocab);
  }

  constructor(els: { loss: HTMLElement; speed: HTMLElement; lr: HTMLElement; norm: HTMLElement }) {
    this.lossEl = els.loss;
    this.loss = this.makeLoss();
    this.speed = new Chart(
      els.speed,
      {
        title: 'Tokens per second',
        series: [{ label: 'step' }, { label: 'tokens/s', stroke: '#2a9d8f', width: 1.5 }],
        axes: [axis('step'), { ...axis('tokens/s'), values: (_u, vals) => vals.map(compactNumber) }],
        legend: { show: false },
      },
      2,
    );
    this.lr = new Chart(
      els.lr,
      {
        title: 'Learning rate',
        series: [{ label: 'step' }, { label: 'lr', stroke: '#e76f51', width: 1.5 }],
        axes: [
          axis('step'),
          { ...axis('lr'), size: 70, values: (_u, vals) => vals.map((v) => (v === 0 ? '0' : v.toExponential(1))) },
        ],
        legend: { show: false },
      },
      2,
    );
    this.norm = new Chart(
      els.norm,
      {
        title: 'Gradient norm (before clipping)',
        series: [{ label: 'step' }, { label: 'grad norm', stroke: '#8338ec', width: 1.5 }],
        axes: [axis('step'), axis('norm')],
        legend: { show: false },
      },
      2,
    );
  }

  private makeLoss(): Chart {
    return new Chart(
      this.lossEl,
      {
        title: this.vocab === 256 ? 'Loss (nats per byte)' : 'Loss (nats per token)',
        scales: { y: this.logScale ? { distr: 3 } : {} },
        series: [
          { label: 'step' },
          // A validation row has no train loss (null): span it, or the line breaks at every evaluation.
          { label: 'train', stroke: '#264653', width: 1.5, spanGaps: true },
          { label: 'validation', stroke: '#e9c46a', width: 0, points: { show: true, size: 7, fill: '#e9c46a' } },
          { label: `untrained (ln ${this.vocab})`, stroke: '#999', dash: [6, 4], width: 1, points: { show: false } },
        ],
        axes: [axis('step'), axis('loss')],
      },
      4,
    );
  }

  // The loss chart's rows [step, train | null, validation | null, untrained], in step order, and
  // the other charts' [step, tokens/s, lr, norm] for each training step drawn (thin.ts).
  private rows: (number | null)[][] = [];
  private metrics: number[][] = [];
  // The rows of steps trained here (a checkpoint's history rows are never thinned).
  private live = new WeakSet<(number | null)[]>();

  setLogScale(on: boolean): void {
    if (on === this.logScale) return;
    this.logScale = on;
    this.remakeLoss();
  }

  /** The current model's vocabulary size (the loss chart's unit and untrained line). */
  setVocabulary(v: number): void {
    if (v === this.vocab) return;
    this.vocab = v;
    for (const r of this.rows) r[3] = this.untrained;
    this.remakeLoss();
  }

  private remakeLoss(): void {
    this.loss.plot.destroy();
    this.lossEl.replaceChildren();
    const fresh = this.makeLoss();
    this.loss = fresh;
    for (const r of this.rows) fresh.push(r);
  }

  step(step: number, loss: number, tokensPerS: number, lr: number, gradNorm: number): void {
    // The curve's grid (thin.ts): the previous newest step goes when it is off the grid, and all
    // the steps off it when the grid coarsens; the charts are then drawn anew from the rows.
    const newest = this.metrics.at(-1)?.[0];
    const { coarsened, newestGoes } = thinning(newest, step, DRAWN_STEPS);
    this.metrics = pushThinned(this.metrics, [step, tokensPerS, lr, gradNorm], (m) => m[0]!, DRAWN_STEPS);
    const row = [step, loss, null, this.untrained];
    this.live.add(row);
    const last = this.rows.at(-1);
    if (!coarsened && !newestGoes) {
      this.rows.push(row);
      this.loss.push(row);
      this.speed.push([step, tokensPerS]);
      this.lr.push([step, lr]);
      this.norm.push([step, gradNorm]);
      return;
    }
    if (!coarsened && last && last[0] === newest && this.live.has(last)) {
      // Only the previous newest step went, and it was the loss chart's last row: replace it.
      this.rows[this.rows.length - 1] = row;
      this.loss.replaceLast(row);
      this.speed.replaceLast([step, tokensPerS]);
      this.lr.replaceLast([step, lr]);
      this.norm.replaceLast([step, gradNorm]);
      return;
    }
    const kept = new Set(this.metrics.map((m) => m[0]));
    this.rows = this.rows.filter((r) => !this.live.has(r) || kept.has(r[0]!));
    this.rows.push(row);
    this.loss.reset();
    for (const r of this.rows) this.loss.push(r);
    for (const c of [this.speed, this.lr, this.norm]) c.reset();
    for (const [at, tps, l, g] of this.metrics) {
      this.speed.push([at!, tps!]);
      this.lr.push([at!, l!]);
      this.norm.push([at!, g!]);
    }
  }

  validation(step: number, loss: number): void {
    const row = [step, null, loss, this.untrained];
    this.rows.push(row);
    this.rows.sort((a, b) => a[0]! - b[0]!);
    // uPlot wants x ascending: rebuild the loss columns in order.
    this.loss.reset();
    for (const r of this.rows) this.loss.push(r);
  }

  /** A checkpoint's loss history, [step, train | null, val | null] rows as ptl and this page
   *  write them: the loss chart only (a checkpoint keeps no speed, learning rate or norm). */
  history(rows: [number, number | null, number | null][]): void {
    for (const [step, train, val] of rows) {
      if (train !== null) this.rows.push([step, train, null, this.untrained]);
      if (val !== null) this.rows.push([step, null, val, this.untrained]);
    }
    this.rows.sort((a, b) => a[0]! - b[0]!);
    this.loss.reset();
    for (const r of this.rows) this.loss.push(r);
  }

  /** The steps of the loss chart's rows, in order (train and validation points). */
  lossSteps(): number[] {
    return this.rows.map((r) => r[0]!);
  }

  reset(): void {
    this.rows = [];
    this.metrics = [];
    for (const c of [this.loss, this.speed, this.lr, this.norm]) c.reset();
  }
}

/** The Fine-tune panel's loss chart: each fine-tuning step's training loss (one run at a time). */
export class FinetuneChart {
  private readonly chart: Chart;
  private steps: number[] = [];

  constructor(el: HTMLElement) {
    this.chart = new Chart(
      el,
      {
        title: 'Fine-tuning loss',
        series: [{ label: 'step' }, { label: 'train', stroke: '#264653', width: 1.5 }],
        axes: [axis('step'), axis('loss')],
        legend: { show: false },
      },
      2,
    );
  }

  step(step: number, loss: number): void {
    this.steps.push(step);
    this.chart.push([step, loss]);
  }

  /** The steps drawn, in order. */
  drawnSteps(): number[] {
    return [...this.steps];
  }

  reset(): void {
    this.steps = [];
    this.chart.reset();
  }
}
