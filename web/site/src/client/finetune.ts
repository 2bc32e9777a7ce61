// The playground's Fine-tune panel: LoRA or full fine-tuning of the current (or the pretrained,
// or a Hugging Face GPT-2) model on an uploaded .txt or .jsonl, in the training worker, with its
// loss chart, then base and fine-tuned samples side by side for the same prompt and seed;
// adapters download (ours, or PEFT's files) and load; the fine-tuned model downloads as a
// checkpoint or a Hugging Face folder's files.
//
// A GPT-2 folder's files are read by the engine (`ptl import-hf`'s code) in the worker, and
// remembered in OPFS (autosave.ts) once they read well, so a reload offers the same model.
import type { FinetuneSummary, FolderFile } from './protocol.js';
import type { Session } from './session.js';
import { saveFile } from './save-file.js';
import { FinetuneChart } from './charts.js';
import * as store from './autosave.js';

// The files the engine reads from a GPT-2 folder; others (pytorch_model.bin, README.md, ...)
// are handed over by name only, so that the engine's messages can say what the folder holds.
const READ = /^(config\.json|model\.safetensors\.index\.json|tokenizer\.json|vocab\.json|merges\.txt|.*\.safetensors)$/;
// LoRA on GPT-2: its modules (c_attn = qkv, attn.c_proj, mlp.c_fc, mlp.c_proj), PEFT's targets.
const GPT2_TARGETS = ['qkv', 'o', 'fc_in', 'fc_out'];

const $ = <T extends HTMLElement = HTMLElement>(id: string) => document.getElementById(id) as T;

/** `model`: whether there is a model to fine-tune, and whether it is free (not training or sampling). */
export function wireFinetune(session: () => Session, model: () => 'none' | 'busy' | 'ready'): { refresh: () => void } {
  const hasModel = () => model() === 'ready';
  let busy = false;
  let tuned: FinetuneSummary | null = null;
  const chart = new FinetuneChart($('ft-chart-loss'));
  // The GPT-2 folder read last (its files stay here: a new worker, after a change of backend
  // build, reads them again), and the session that read it.
  let gpt2: { label: string; files: FolderFile[]; summary: string; session: Session | null } | null = null;
  // A read-only view for tools and tests: the fine-tuning losses and the steps the chart drew.
  const hook = { losses: [] as number[], chartSteps: () => chart.drawnSteps(), gpt2: null as string | null };
  (window as unknown as { ptlFinetune: typeof hook }).ptlFinetune = hook;
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
    const source = $<HTMLSelectElement>('ft-source').value;
    const fromPretrained = source === 'pretrained' || (source === 'gpt2' && gpt2 !== null);
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
    $<HTMLButtonElement>('ft-download-peft').disabled = busy || tuned === null || !tuned.lora.enabled;
    $<HTMLButtonElement>('ft-download-hf').disabled = busy || tuned === null;
    for (const id of ['gpt2-files', 'gpt2-folder', 'gpt2-remembered']) $<HTMLInputElement>(id).disabled = busy;
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
      const fromGpt2 = $<HTMLSelectElement>('ft-source').value === 'gpt2';
      if (fromGpt2 && gpt2 && gpt2.session !== session()) {
        await session().call('gpt2Open', { files: gpt2.files, label: gpt2.label });
        gpt2.session = session();
      }
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
      chart.reset();
      hook.losses = [];
      tuned = await session().call(
        'ftStart',
        {
          base,
          gpt2: fromGpt2,
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
          if (ev.event === 'ftstep') {
            chart.step(ev.data.step, ev.data.loss);
            hook.losses.push(ev.data.loss);
            status(`Fine-tuning on ${f.name}: step ${ev.data.step} of ${steps}, loss ${ev.data.loss.toFixed(4)}`);
          }
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
      $('ft-speed').textContent =
        `Fine-tuned sample: ${r.tunedTokens} tokens in ${r.tunedSeconds.toFixed(2)} s (${(r.tunedTokens / Math.max(r.tunedSeconds, 1e-9)).toFixed(1)} tokens/s).`;
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
  // Several files, one download each (the browser may ask once to allow multiple downloads).
  const saveAll = (files: FolderFile[]) => {
    for (const f of files) saveFile(f.bytes, f.name);
  };
  const exporting = async (what: string, run: () => Promise<void>) => {
    busy = true;
    refresh();
    try {
      await run();
    } catch (e) {
      status(`Could not export ${what}: ${e instanceof Error ? e.message : String(e)}`, 'error');
    } finally {
      busy = false;
      refresh();
    }
  };
  $('ft-download-peft').addEventListener('click', () =>
    exporting('the PEFT adapter', async () =>
      saveAll(await session().call('ftExportPeft', { baseModel: gpt2?.label ?? '' })),
    ),
  );
  $('ft-download-hf').addEventListener('click', () =>
    exporting('the merged model', async () => saveAll(await session().call('ftExportHf', {}))),
  );

  const gpt2Status = (text: string, kind: '' | 'error' | 'ok' = '') => {
    const el = $('gpt2-status');
    el.textContent = text;
    el.className = `status ${kind}`.trim();
  };
  /** Reads a folder's files in the worker; `remember`: keep them in OPFS once they read well. */
  const openGpt2 = async (label: string, files: FolderFile[], remember: boolean) => {
    busy = true;
    refresh();
    const where = label || 'the files chosen';
    gpt2Status(`Reading ${where}…`);
    try {
      const r = await session().call('gpt2Open', { files, label });
      gpt2 = { label, files, summary: r.summary, session: session() };
      hook.gpt2 = r.summary;
      const option = document.querySelector<HTMLOptionElement>('#ft-source option[value="gpt2"]')!;
      option.disabled = false;
      option.textContent = `The GPT-2 model${label ? ` (${label})` : ''}`;
      $<HTMLSelectElement>('ft-source').value = 'gpt2';
      for (const c of document.querySelectorAll<HTMLInputElement>('input[name="ft-target"]'))
        c.checked = GPT2_TARGETS.includes(c.value);
      let note = '';
      if (remember) {
        try {
          await store.rememberFolder(
            label,
            files.filter((f) => READ.test(f.name)),
          );
          await showRemembered();
          note = ' Remembered in this browser.';
        } catch (e) {
          note = ` (Not remembered: ${e instanceof Error ? e.message : String(e)}.)`;
        }
      }
      gpt2Status(`${label ? `${label}: ` : ''}${r.summary}.${note}`, 'ok');
    } catch (e) {
      gpt2Status(`Could not read ${where}: ${e instanceof Error ? e.message : String(e)}`, 'error');
    } finally {
      busy = false;
      refresh();
    }
  };
  const picked = async (input: HTMLInputElement) => {
    const list = [...(input.files ?? [])];
    input.value = '';
    if (list.length === 0) return;
    // A folder's files come with their path in it ("gpt2/config.json"): only the top level counts.
    const rel = (f: File) => (f as File & { webkitRelativePath?: string }).webkitRelativePath ?? '';
    const inFolder = list.some((f) => rel(f).includes('/'));
    const label = inFolder ? rel(list[0]!).split('/')[0]! : '';
    const top = inFolder ? list.filter((f) => rel(f).split('/').length === 2) : list;
    // Reading a large model.safetensors into memory takes a while: say so before it starts.
    gpt2Status(`Reading ${label || 'the files chosen'}…`);
    const files: FolderFile[] = [];
    for (const f of top)
      files.push({ name: f.name, bytes: READ.test(f.name) ? new Uint8Array(await f.arrayBuffer()) : new Uint8Array() });
    await openGpt2(label, files, true);
  };
  const showRemembered = async () => {
    const r = await store.rememberedFolder().catch(() => null);
    const b = $<HTMLButtonElement>('gpt2-remembered');
    b.hidden = r === null;
    if (r) b.textContent = `Use the remembered model${r.label ? ` (${r.label})` : ''}: ${r.files.join(', ')}`;
  };
  // A folder picker (Astro's attribute types lack webkitdirectory).
  $<HTMLInputElement>('gpt2-folder').webkitdirectory = true;
  $('gpt2-files').addEventListener('change', () => void picked($<HTMLInputElement>('gpt2-files')));
  $('gpt2-folder').addEventListener('change', () => void picked($<HTMLInputElement>('gpt2-folder')));
  $('gpt2-remembered').addEventListener('click', async () => {
    const r = await store.recallFolder().catch(() => null);
    if (!r) {
      gpt2Status(
        "The remembered model is incomplete (a file is missing from this browser's storage): choose its files again.",
        'error',
      );
      return;
    }
    await openGpt2(r.label, r.files, false);
  });
  void showRemembered();

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
