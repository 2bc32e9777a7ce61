// A run's curve at a bounded resolution. A run of 20,000 steps would otherwise keep, redraw and
// autosave every step: uPlot recomputes a chart's whole path at each frame, and the autosave
// serialises the whole step list every 50 steps, so the garbage made per second grew with the
// run's length (docs/reliability.md, "Memory over long runs"). A chart a few hundred pixels wide
// shows no more than a couple of thousand points. So a curve keeps the steps on a grid whose
// spacing doubles whenever the run outgrows its bound (every step, then every 2nd, 4th, ...),
// and its newest step wherever it falls. The grid depends on step numbers alone, so a curve
// restored from an autosave goes on thinning the same way.

/** The most steps a run's saved state keeps. */
export const SAVED_STEPS = 4000;
/** The most training steps a chart draws. */
export const DRAWN_STEPS = 2000;

/** The grid's spacing once a run has reached `step`: at most `bound` grid steps up to it. */
export function strideAt(step: number, bound: number): number {
  let s = 1;
  while (step / s > bound) s *= 2;
  return s;
}

/**
 * What adding the point of `step` to a curve whose newest point is at `newest` (undefined: an
 * empty curve) does: `stride`, the grid's spacing from then on; `coarsened`, the grid coarsens,
 * so the points off it go; `newestGoes`, the previous newest point goes, being off the grid.
 */
export function thinning(
  newest: number | undefined,
  step: number,
  bound: number,
): { stride: number; coarsened: boolean; newestGoes: boolean } {
  const stride = strideAt(step, bound);
  return {
    stride,
    coarsened: stride !== strideAt(step - 1, bound),
    newestGoes: newest !== undefined && newest % stride !== 0,
  };
}

/**
 * Appends `x`, the point of step `stepOf(x)`, to the curve `xs` (in step order) as `thinning`
 * says. Returns the curve: `xs` itself, or a new array when the grid coarsened.
 */
export function pushThinned<T>(xs: T[], x: T, stepOf: (p: T) => number, bound: number): T[] {
  const newest = xs.at(-1);
  const t = thinning(newest === undefined ? undefined : stepOf(newest), stepOf(x), bound);
  if (t.newestGoes) xs.pop();
  if (t.coarsened) xs = xs.filter((p) => stepOf(p) % t.stride === 0);
  xs.push(x);
  return xs;
}
