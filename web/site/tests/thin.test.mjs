// thin.ts, the bound on a run's curve (the charts and the autosaved step list), and the
// dashboard's charts that use it, without a browser: esbuild compiles the modules in memory, the
// charts against a stand-in for uPlot that keeps the columns it is given.
import assert from 'node:assert/strict';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

import esbuild from 'esbuild';

const here = path.dirname(fileURLToPath(import.meta.url));
const load = async (file, plugins = []) => {
  const built = await esbuild.build({
    entryPoints: [path.join(here, '../src/client', file)],
    bundle: true,
    format: 'esm',
    write: false,
    plugins,
  });
  return import(`data:text/javascript,${encodeURIComponent(built.outputFiles[0].text)}`);
};
const { pushThinned, strideAt, SAVED_STEPS, DRAWN_STEPS } = await load('thin.ts');

// uPlot's stand-in: the columns of the last setData; the stylesheet, nothing.
const fakeUplot = {
  name: 'fake-uplot',
  setup(b) {
    b.onResolve({ filter: /^uplot/ }, (a) => ({ path: a.path, namespace: 'fake' }));
    b.onLoad({ filter: /\.css$/, namespace: 'fake' }, () => ({ contents: '', loader: 'js' }));
    b.onLoad({ filter: /.*/, namespace: 'fake' }, () => ({
      contents: `export default class {
        constructor(opts, data) { this.data = data; globalThis.plots.push(this); }
        setData(d) { this.data = d; } setScale() {} setSize() {} destroy() {}
      }`,
      loader: 'js',
    }));
  },
};
globalThis.plots = [];
globalThis.requestAnimationFrame = (f) => f();
globalThis.ResizeObserver = class {
  observe() {}
};
const { Dashboard } = await load('charts.ts', [fakeUplot]);

const run = (first, last, bound, start = []) => {
  let curve = start;
  let most = 0;
  for (let step = first; step <= last; step++) {
    curve = pushThinned(curve, { step }, (p) => p.step, bound);
    most = Math.max(most, curve.length);
  }
  return { steps: curve.map((p) => p.step), most };
};

test('the grid: every step up to the bound, then every 2nd, 4th, ...', () => {
  assert.equal(strideAt(1, 4), 1);
  assert.equal(strideAt(4, 4), 1);
  assert.equal(strideAt(5, 4), 2);
  assert.equal(strideAt(8, 4), 2);
  assert.equal(strideAt(9, 4), 4);
  assert.deepEqual(run(1, 4, 4).steps, [1, 2, 3, 4]);
  assert.deepEqual(run(1, 5, 4).steps, [2, 4, 5], 'step 5 coarsens the grid; the newest stays');
  assert.deepEqual(run(1, 7, 4).steps, [2, 4, 6, 7], 'an off-grid newest point goes when the next comes');
  assert.deepEqual(run(1, 9, 4).steps, [4, 8, 9]);
});

test("a 50,000-step run's curve stays bounded and evenly spaced, from its start to its last step", () => {
  assert.ok(DRAWN_STEPS < SAVED_STEPS);
  for (const bound of [SAVED_STEPS, DRAWN_STEPS]) {
    const { steps, most } = run(1, 50000, bound);
    assert.ok(most <= bound + 1, `at most ${bound + 1} points held (${most})`);
    assert.ok(steps.length > bound / 2, `more than half the bound kept (${steps.length})`);
    assert.equal(steps.at(-1), 50000, 'the last step');
    const s = strideAt(50000, bound);
    const gaps = new Set(steps.slice(1, -1).map((x, i) => x - steps[i]));
    assert.deepEqual([...gaps], [s], `every gap ${s} steps but the newest`);
    assert.equal(steps[0], s, 'the curve starts at the first grid step');
  }
});

test('a curve restored mid-run goes on as if never interrupted', () => {
  const whole = run(1, 30000, 1000).steps;
  const first = run(1, 12345, 1000).steps;
  assert.deepEqual(
    run(
      12346,
      30000,
      1000,
      first.map((step) => ({ step })),
    ).steps,
    whole,
  );
});

test("the dashboard draws a 10,000-step run at most DRAWN_STEPS steps wide, every validation and a checkpoint's history kept", () => {
  globalThis.plots = [];
  const el = () => ({ clientWidth: 600, replaceChildren() {} });
  const dash = new Dashboard({ loss: el(), speed: el(), lr: el(), norm: el() });
  const [loss, speed] = globalThis.plots;
  // A checkpoint opened at step 20 (history points at 10 and 20), then trained on to 10,000.
  dash.history([
    [10, 3.0, null],
    [20, 2.9, 3.1],
  ]);
  let most = 0;
  for (let step = 21; step <= 10000; step++) {
    dash.step(step, 2 + 1 / step, 1000 + step, 1e-3, 0.5);
    if (step % 500 === 0) dash.validation(step, 2.5 + 1 / step);
    most = Math.max(most, speed.data[0].length);
  }
  const s = strideAt(10000, DRAWN_STEPS);
  assert.ok(most <= DRAWN_STEPS + 1, `at most ${DRAWN_STEPS + 1} steps drawn (${most})`);
  const drawn = speed.data[0];
  assert.equal(drawn.at(-1), 10000, 'the newest step');
  assert.ok(
    drawn.every((x) => x % s === 0),
    `every step drawn on the grid of ${s}`,
  );
  assert.deepEqual(
    speed.data[1],
    drawn.map((x) => 1000 + x),
    'tokens/s beside its step',
  );
  const [steps, train, val] = loss.data;
  assert.deepEqual(
    steps,
    [...steps].sort((a, b) => a - b),
    'the loss rows in step order',
  );
  const valSteps = steps.filter((_, i) => val[i] !== null);
  assert.deepEqual(valSteps, [20, ...Array.from({ length: 20 }, (_, i) => 500 * (i + 1))], 'every validation');
  const trainSteps = steps.filter((_, i) => train[i] !== null);
  assert.deepEqual(trainSteps, [10, 20, ...drawn], "the history's train points, then the steps drawn");
  assert.deepEqual(dash.lossSteps(), steps);
});
