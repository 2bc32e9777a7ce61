// /performance: each results file with a speedup (or ratio) column drawn as a bar-like curve over
// its rows, with a line at 1 (parity with the peer).
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';

interface Curve {
  id: string;
  file: string;
  key: string;
  points: { label: string; value: number }[];
}

export function drawCurves(): void {
  for (const el of document.querySelectorAll<HTMLElement>('.perf-curve')) {
    const c = JSON.parse(el.dataset['curve'] ?? '{}') as Curve;
    const xs = c.points.map((_, i) => i);
    const labels = c.points.map((p) => p.label);
    const plot = new uPlot(
      {
        width: Math.max(280, el.clientWidth),
        height: 240,
        scales: { x: { time: false, range: [-0.5, Math.max(0.5, xs.length - 0.5)] }, y: { range: (_u, _min, max) => [0, Math.max(1.2, max * 1.1)] } },
        series: [
          { label: 'row' },
          { label: c.key, stroke: '#1f6f8b', width: 2, points: { show: true, size: 8, fill: '#1f6f8b' } },
          { label: 'parity (1.0)', stroke: '#999', dash: [6, 4], width: 1, points: { show: false } },
        ],
        axes: [
          { stroke: 'currentColor', values: (_u, vals) => vals.map((v) => (Number.isInteger(v) ? (labels[v] ?? '') : '')), rotate: -30, size: 70, incrs: [1] },
          { stroke: 'currentColor', label: c.key },
        ],
      },
      [xs, c.points.map((p) => p.value), xs.map(() => 1)],
      el,
    );
    new ResizeObserver(() => plot.setSize({ width: Math.max(280, el.clientWidth), height: 240 })).observe(el);
  }
}
