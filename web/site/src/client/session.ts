// The page's side of the training worker: typed calls, events, and errors as exceptions.
import type { Method, Methods, Reply, WorkerEvent } from './protocol.js';

export class SessionError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SessionError';
  }
}

type Pending = {
  resolve: (v: unknown) => void;
  reject: (e: Error) => void;
  onEvent?: ((ev: WorkerEvent) => void) | undefined;
};

export class Session {
  private readonly worker: Worker;
  private next = 1;
  private readonly pending = new Map<number, Pending>();

  constructor() {
    // Vite bundles the worker (a classic one: see astro.config.mjs) and rewrites this URL.
    this.worker = new Worker(new URL('./session-worker.ts', import.meta.url), { name: 'ptl-session' });
    this.worker.addEventListener('message', (ev: MessageEvent<Reply>) => {
      const msg = ev.data;
      const p = this.pending.get(msg.id);
      if (!p) return;
      if ('event' in msg) {
        p.onEvent?.(msg);
        return;
      }
      this.pending.delete(msg.id);
      if (msg.ok) p.resolve(msg.result);
      else p.reject(new SessionError(msg.error.message));
    });
    this.worker.addEventListener('error', (ev) => {
      const err = new SessionError(`the training worker failed: ${ev.message || 'unknown error'}`);
      for (const p of this.pending.values()) p.reject(err);
      this.pending.clear();
    });
  }

  call<M extends Method>(
    method: M,
    params: Methods[M]['params'],
    onEvent?: (ev: WorkerEvent) => void,
  ): Promise<Methods[M]['result']> {
    const id = this.next++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve: resolve as (v: unknown) => void, reject, onEvent });
      this.worker.postMessage({ id, method, params });
    });
  }

  /**
   * Ends the worker and the engine's threads: asks it to shut down (it joins its threads and
   * closes itself), then terminates it in any case, after `graceMs` at most. Pending calls reject.
   */
  async close(graceMs = 2000): Promise<void> {
    await Promise.race([this.call('shutdown', {}).catch(() => null), new Promise((r) => setTimeout(r, graceMs))]);
    this.terminate();
  }

  /** Ends the worker (and the engine's threads) now; pending calls reject. */
  terminate(): void {
    this.worker.terminate();
    const err = new SessionError('the training worker was replaced');
    for (const p of this.pending.values()) p.reject(err);
    this.pending.clear();
  }

  /** Stops the running call (training or sampling) at its next step or token. */
  abort(): Promise<null> {
    return this.call('abort', {});
  }
}
