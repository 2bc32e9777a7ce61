// /kernels: starts the checks worker and fills the tables as results arrive.
import type { CaseResult } from '@posttrainllm/webgpu';

type Msg =
  | { kind: 'engine' | 'gpu-none' | 'gpu-adapter' | 'error'; detail: string }
  | { kind: 'wasm'; name: string; passed: boolean; detail: string }
  | { kind: 'kernel'; result: CaseResult; line: string }
  | {
      kind: 'gpu-summary';
      summary: {
        kernels_passed: number;
        kernels_total: number;
        cases_passed: number;
        cases_total: number;
        cases_skipped: number;
      };
    }
  | { kind: 'done' };

function cell(tr: HTMLTableRowElement, text: string, cls = ''): void {
  const td = document.createElement('td');
  td.textContent = text;
  if (cls) td.className = cls;
  tr.append(td);
}

export function startChecks(): void {
  const button = document.getElementById('run-checks') as HTMLButtonElement;
  const status = document.getElementById('checks-status')!;
  const summary = document.getElementById('checks-summary')!;
  const wasmBody = document.querySelector('#wasm-table tbody')!;
  const gpuBody = document.querySelector('#gpu-table tbody')!;
  button.addEventListener('click', () => {
    button.disabled = true;
    wasmBody.replaceChildren();
    gpuBody.replaceChildren();
    summary.replaceChildren();
    status.className = 'status';
    status.textContent = 'Loading the engine…';
    document.body.dataset['checks'] = 'running';
    const worker = new Worker(new URL('./checks-worker.ts', import.meta.url), { name: 'ptl-checks' });
    let failures = 0;
    let cases = 0;
    worker.addEventListener('message', (ev: MessageEvent<Msg>) => {
      const m = ev.data;
      switch (m.kind) {
        case 'engine':
          status.textContent = `${m.detail}: running the WebAssembly checks…`;
          break;
        case 'wasm': {
          const tr = document.createElement('tr');
          cell(tr, m.name);
          cell(tr, m.passed ? 'pass' : 'FAIL');
          cell(tr, m.detail);
          wasmBody.append(tr);
          if (!m.passed) failures++;
          break;
        }
        case 'gpu-adapter':
          document.getElementById('gpu-adapter')!.textContent = `Adapter: ${m.detail}`;
          status.textContent = 'Running the WebGPU kernel checks…';
          break;
        case 'gpu-none':
          document.getElementById('gpu-adapter')!.textContent = `Skipped: ${m.detail}.`;
          break;
        case 'kernel': {
          const r = m.result;
          const tr = document.createElement('tr');
          const outs = Object.values(r.outputs);
          cell(tr, r.kernel);
          cell(tr, r.case);
          cell(tr, r.skipped ? 'skipped' : r.passed ? 'pass' : 'FAIL');
          cell(tr, outs.length ? Math.max(...outs.map((o) => o.max_abs)).toExponential(2) : '–', 'num');
          cell(tr, outs.length ? Math.max(...outs.map((o) => o.max_rel)).toExponential(2) : '–', 'num');
          cell(tr, r.skipped ?? r.error ?? `${r.atol}, ${r.rtol}`);
          gpuBody.append(tr);
          if (!r.skipped && !r.passed) failures++;
          status.textContent = `Running the WebGPU kernel checks… ${++cases} cases done`;
          break;
        }
        case 'gpu-summary': {
          const s = m.summary;
          for (const [k, v] of [
            ['Kernels passed', `${s.kernels_passed} / ${s.kernels_total}`],
            ['Cases passed', `${s.cases_passed} / ${s.cases_total}`],
            ['Cases skipped', String(s.cases_skipped)],
          ]) {
            const li = document.createElement('li');
            li.innerHTML = '<span class="k"></span><span class="v"></span>';
            li.querySelector('.k')!.textContent = k!;
            li.querySelector('.v')!.textContent = v!;
            summary.append(li);
          }
          document.body.dataset['kernelsPassed'] = String(s.kernels_passed);
          document.body.dataset['kernelsTotal'] = String(s.kernels_total);
          document.body.dataset['casesTotal'] = String(s.cases_total);
          break;
        }
        case 'error':
          failures++;
          status.className = 'status error';
          status.textContent = `The checks stopped: ${m.detail}`;
          break;
        case 'done':
          worker.terminate();
          button.disabled = false;
          if (status.className !== 'status error') {
            status.className = failures ? 'status error' : 'status ok';
            status.textContent = failures ? `${failures} check(s) failed.` : 'Every check passed.';
          }
          document.body.dataset['checks'] = failures ? 'failed' : 'passed';
          break;
      }
    });
    worker.postMessage({ quick: (document.getElementById('checks-quick') as HTMLInputElement).checked });
  });
}
