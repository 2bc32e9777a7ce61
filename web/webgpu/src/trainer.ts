// Training on the WebGPU executor: one submit per step, the loss read back asynchronously every
// `readEvery` steps, and checkpoints in ptl's format (docs/checkpoint-format.md) that `ptl`
// loads and resumes.
import { dropoutKey } from './dropout.js';
import { type Executor, type WebGPUBackend, WebGPUError } from './executor.js';
import { type SafeTensorsFile, type StTensor, encodeSafeTensors } from './safetensors.js';

export interface StepLoss {
  step: number;
  loss: number;
  gradNorm: number;
}

export interface TrainerOptions {
  readEvery?: number; // read the loss back every N steps (default 1); the last step is always read by flush()
  onLoss?: (r: StepLoss) => void;
  // The run's seed (train_config.seed of the checkpoint): a program with dropout needs it, its
  // masks are drawn from {dropoutKey(seed), step} so that every backend drops the same elements.
  seed?: number | bigint;
  lossesKept?: number; // how many of the last steps' losses `losses` holds (default 1000)
}

const LOSSES_KEPT = 1000;

export class WebGPUTrainer {
  readonly backend: WebGPUBackend;
  readonly exec: Executor;
  step = 0; // completed optimizer steps
  tokensSeen = 0;
  // The losses read back, the last `lossesKept` steps' only: a run of any length holds the same
  // memory (bench/long_run; docs/reliability.md, "Memory over long runs").
  readonly losses = new Map<number, StepLoss>();
  private readonly readEvery: number;
  private readonly onLoss: ((r: StepLoss) => void) | undefined;
  private readonly pending = new Set<Promise<void>>();
  private readonly batchSize: number;
  private readonly tokensPerStep: number;
  private readonly dropoutKey: number | null;
  private readonly lossesKept: number;

  constructor(exec: Executor, opts: TrainerOptions = {}, firstStep = 0) {
    this.exec = exec;
    this.backend = exec.backend;
    this.readEvery = Math.max(1, opts.readEvery ?? 1);
    this.onLoss = opts.onLoss;
    this.lossesKept = Math.max(1, opts.lossesKept ?? LOSSES_KEPT);
    this.step = firstStep;
    const tokens = exec.tensor('tokens').info.shape;
    this.batchSize = tokens[0]!;
    this.tokensPerStep = tokens.reduce((a, b) => a * b, 1);
    // Only a program with dropout reads the seed (one a number cannot hold exactly is refused).
    this.dropoutKey = null;
    if (exec.has('dropout.seed')) {
      if (opts.seed === undefined)
        throw new WebGPUError(
          `program '${exec.program.name}' has dropout: the trainer needs the run's seed (option seed)`,
        );
      this.dropoutKey = dropoutKey(opts.seed);
    }
  }

  // Uploads the batch and the step's hyperparameters, records the whole step (forward, backward,
  // norm, AdamW) into one command encoder and submits it. Never waits for the GPU.
  trainStep(tokens: ArrayLike<number>, targets: ArrayLike<number>, lr: number): void {
    this.exec.setInput('tokens', tokens);
    this.exec.setInput('targets', targets);
    const step = this.step + 1;
    this.exec.setHparams(lr, step);
    if (this.dropoutKey !== null) this.exec.setDropoutSeed(this.dropoutKey, step);
    const read = step % this.readEvery === 0;
    const p = this.exec.run(read ? ['loss', 'grad_norm'] : []);
    this.step = step;
    this.tokensSeen += this.tokensPerStep;
    if (p) this.track(p, step);
  }

  private track(p: Promise<Map<string, Float32Array | Int32Array>>, step: number): void {
    const done = p.then((m) => {
      const r = { step, loss: m.get('loss')![0]!, gradNorm: m.get('grad_norm')![0]! };
      this.remember(r);
      this.onLoss?.(r);
    });
    const tracked = done.finally(() => this.pending.delete(tracked));
    this.pending.add(tracked);
  }

  private remember(r: StepLoss): void {
    this.losses.set(r.step, r);
    // A Map iterates in insertion order, and the readbacks arrive in step order: the first key is the oldest.
    while (this.losses.size > this.lossesKept) this.losses.delete(this.losses.keys().next().value!);
  }

  // Waits for every outstanding loss readback (and reads the last step's loss if it was skipped);
  // throws the first device error.
  async flush(): Promise<void> {
    if (this.step > 0 && !this.losses.has(this.step) && this.pending.size === 0) {
      const m = await this.backend.read([this.exec.tensor('loss'), this.exec.tensor('grad_norm')]);
      const r = { step: this.step, loss: m.get('loss')![0]!, gradNorm: m.get('grad_norm')![0]! };
      this.remember(r);
      this.onLoss?.(r);
    }
    while (this.pending.size > 0) await Promise.all([...this.pending]);
    await this.backend.device.queue.onSubmittedWorkDone();
    this.backend.check();
  }

  // A ptl checkpoint of the current weights (and AdamW moments): metadata copied from `init` (the
  // checkpoint the run started from) with train_state.step / tokens_seen brought up to date and
  // train_config.batch set to this run's batch.
  async exportCheckpoint(init: SafeTensorsFile, withOptimizer = true): Promise<Uint8Array> {
    await this.flush();
    const params = init.tensors.filter((t) => !t.name.startsWith('optim.'));
    const store = this.backend.store;
    const names = params.map((t) => t.name);
    const moments = withOptimizer ? ['optim.m.', 'optim.v.'].flatMap((pre) => names.map((n) => pre + n)) : [];
    const present = moments.filter((n) => store.has(n));
    if (present.length !== 0 && present.length !== moments.length)
      throw new WebGPUError('optimizer moments exist for some parameters but not all');
    const all = [...names, ...present];
    for (const n of names) if (!store.has(n)) throw new WebGPUError(`parameter '${n}' is not on the GPU`);
    const data = await this.backend.read(all.map((n) => store.get(n)!));
    const shapeOf = new Map(params.map((t) => [t.name, t.shape]));
    const tensors: StTensor[] = all.map((n) => ({
      name: n,
      dtype: 'F32',
      shape: shapeOf.get(n.replace(/^optim\.[mv]\./, ''))!,
      data: data.get(n)!,
    }));
    const metadata = { ...init.metadata };
    const state = metadata['train_state'] ? (JSON.parse(metadata['train_state']) as Record<string, unknown>) : {};
    state['step'] = this.step;
    state['tokens_seen'] = Number(state['tokens_seen'] ?? 0) + this.tokensSeen;
    metadata['train_state'] = JSON.stringify(state);
    if (metadata['train_config']) {
      const tc = JSON.parse(metadata['train_config']) as Record<string, unknown>;
      tc['batch'] = this.batchSize;
      metadata['train_config'] = JSON.stringify(tc);
    }
    const hist = [...this.losses.values()]
      .sort((a, b) => a.step - b.step)
      .slice(-200)
      .map((r) => [r.step, r.loss, null]);
    metadata['loss_history'] = JSON.stringify(hist);
    metadata['created_by'] = 'ptl-webgpu 0.1.0';
    return encodeSafeTensors({ metadata, tensors });
  }
}
