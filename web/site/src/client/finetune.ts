// The playground's Fine-tune panel: LoRA or full fine-tuning of the current (or the pretrained)
// model on an uploaded .txt or .jsonl, in the training worker, then base and fine-tuned samples
// side by side for the same prompt and seed; adapters download and load.
import type { FinetuneSummary } from './protocol.js';
import type { Session } from './session.js';
import { saveFile } from './save-file.js';

const $ = <T extends HTMLElement = HTMLElement>(id: string) => document.getElementById(id) as T;

/** `model`: whether there is a model to fine-tune, and whether it is free (not training or sampling). */
export function wireFinetune(session: () => Session, model: () => 'none' | 'busy' | 'ready'): { refresh: () => void } {
  const hasModel = () => model() === 'ready';
  let busy = false;
  let tuned: FinetuneSummary | null = null;
  // The line says what to do next until a fine-tuning (or an adapter) puts its own result there.
  let guiding = true;
  const status = (text: string, kind: '' | 'error' | 'ok' = '') => {
    const el = $('ft-status');
    el.textContent = text;
    el.className = `status ${kind}`.trim();
    guiding = false;
  };
  const refresh = () => {
    const file = $<HTMLInputElement>('ft-file').files?.length ?? 0;
    const fromPretrained = $<HTMLSelectElement>('ft-source').value === 'pretrained';
    if (guiding) {
      const el = $('ft-status');
      el.textContent =
        model() === 'none' && !fromPretrained
          ? 'Train or load a model first (or start from the pretrained model), then choose data.'
          : model() === 'busy' && !fromPretrained
            ? 'The model is training or sampling: fine-tune it once that is done.'
            : file === 0
              ? 'Choose the fine-tuning data (.txt or .jsonl), then press Fine-tune.'
              : 'Ready: press Fine-tune.';
      el.className = 'status';
    }
    $<HTMLButtonElement>('ft-start').disabled = busy || file === 0 || (!hasModel() && !fromPretrained);
    $<HTMLButtonElement>('ft-stop').disabled = !busy;
    $<HTMLButtonElement>('ft-compare').disabled = busy || tuned === null;
    // A LoRA run gives an adapter; full fine-tuning a whole model.
    $<HTMLButtonElement>('ft-download').disabled = busy || tuned === null;
    $('ft-download').textContent = tuned && !tuned.lora.enabled ? 'Download fine-tuned model' : 'Download adapter';
    const lora = $<HTMLSelectElement>('ft-mode').value === 'lora';
    for (const id of ['ft-rank', 'ft-alpha']) $<HTMLInputElement>(id).disabled = !lora;
    for (const c of document.querySelectorAll<HTMLInputElement>('input[name="ft-target"]')) c.disabled = !lora;
    document.body.dataset['ft'] = busy ? 'training' : tuned ? 'tuned' : 'none';
  };
  const describe = (s: FinetuneSummary, loaded = false) => {
    const pct = (100 * s.lora.trainable_params) / s.base_params;
    const what = s.lora.enabled
      ? `LoRA rank ${s.lora.rank}, alpha ${s.lora.alpha} on ${s.lora.targets.join(', ')}: ${s.lora.trainable_params.toLocaleString()} trainable parameters (${pct.toFixed(2)}% of the base's ${s.base_params.toLocaleString()})`
      : `every weight (${s.base_params.toLocaleString()} parameters)`;
    const losses =
      s.base_val_loss !== null && s.tuned_val_loss !== null
        ? ` Held-out loss ${s.base_val_loss.toFixed(4)} → ${s.tuned_val_loss.toFixed(4)} (perplexity ${Math.exp(s.base_val_loss).toFixed(2)} → ${Math.exp(s.tuned_val_loss).toFixed(2)}).`
        : '';
    if (loaded) return `${what}, applied to the base.${losses}`;
    return `Fine-tuned ${s.step} steps${s.backend ? ` on ${s.backend === 'webgpu' ? 'WebGPU' : 'WebAssembly'}` : ''}, ${what}.${losses}`;
  };

  $('ft-start').addEventListener('click', async () => {
    const f = $<HTMLInputElement>('ft-file').files![0]!;
    busy = true;
    refresh();
    try {
      let base: Uint8Array | null = null;
      if ($<HTMLSelectElement>('ft-source').value === 'pretrained') {
        const url = document.getElementById('pretrained-banner')?.dataset['url'];
        const r = await fetch(`${import.meta.env.BASE_URL}${url}`);
        if (!r.ok) throw new Error(`the pretrained model did not download (HTTP ${r.status})`);
        base = new Uint8Array(await r.arrayBuffer());
      }
      const targets = [...document.querySelectorAll<HTMLInputElement>('input[name="ft-target"]:checked')].map(
        (c) => c.value,
      );
      const lora =
        $<HTMLSelectElement>('ft-mode').value === 'lora'
          ? {
              rank: Number($<HTMLInputElement>('ft-rank').value),
              alpha: Number($<HTMLInputElement>('ft-alpha').value),
              targets,
            }
          : null;
      const steps = Math.max(1, Math.floor(Number($<HTMLInputElement>('ft-steps').value)));
      status(`Fine-tuning on ${f.name}…`);
      tuned = await session().call(
        'ftStart',
        {
          base,
          steps,
          lr: Number($<HTMLInputElement>('ft-lr').value),
          lora,
          seed: 1,
          data: {
            bytes: new Uint8Array(await f.arrayBuffer()),
            name: f.name,
            kind: /\.jsonl$/i.test(f.name) ? 'jsonl' : 'text',
          },
        },
        (ev) => {
          if (ev.event === 'ftstep')
            status(`Fine-tuning on ${f.name}: step ${ev.data.step} of ${steps}, loss ${ev.data.loss.toFixed(4)}`);
        },
      );
      status(describe(tuned), 'ok');
    } catch (e) {
      status(`Fine-tuning failed: ${e instanceof Error ? e.message : String(e)}`, 'error');
    } finally {
      busy = false;
      refresh();
    }
  });
  $('ft-stop').addEventListener('click', () => void session().abort());
  $('ft-compare').addEventListener('click', async () => {
    busy = true;
    refresh();
    try {
      const r = await session().call('ftCompare', {
        prompt: $<HTMLInputElement>('ft-prompt').value,
        maxTokens: 200,
        temperature: Number($<HTMLInputElement>('ft-temp').value),
        topK: 40,
        seed: Number($<HTMLInputElement>('ft-seed').value),
      });
      $('ft-out-base').textContent = r.base;
      $('ft-out-tuned').textContent = r.tuned;
    } catch (e) {
      status(`Sampling failed: ${e instanceof Error ? e.message : String(e)}`, 'error');
    } finally {
      busy = false;
      refresh();
    }
  });
  $('ft-download').addEventListener('click', async () => {
    if (tuned && !tuned.lora.enabled) saveFile(await session().call('ftExportModel', {}), 'finetuned.tinygpt');
    else saveFile(await session().call('ftExportAdapter', {}), 'adapter.tinygpt-lora');
  });
  $('ft-adapter-file').addEventListener('change', async () => {
    const input = $<HTMLInputElement>('ft-adapter-file');
    const f = input.files?.[0];
    input.value = '';
    if (!f) return;
    busy = true;
    refresh();
    try {
      tuned = await session().call('ftLoadAdapter', { bytes: new Uint8Array(await f.arrayBuffer()), name: f.name });
      status(`Loaded ${f.name}: ${describe(tuned, true)}`, 'ok');
    } catch (e) {
      status(`Could not load ${f.name}: ${e instanceof Error ? e.message : String(e)}. Nothing changed.`, 'error');
    } finally {
      busy = false;
      refresh();
    }
  });
  for (const id of ['ft-file', 'ft-source', 'ft-mode']) $(id).addEventListener('change', refresh);
  refresh();
  return { refresh };
}
