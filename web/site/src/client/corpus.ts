// Where the training text comes from: TinyShakespeare (served with the site, else its public
// URL, checked against its sha256), a .txt the visitor uploads, or a Hugging Face dataset read
// through the datasets-server /rows API.

export const TINY_SHAKESPEARE_SHA256 = '86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed';
export const TINY_SHAKESPEARE_URL =
  'https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt';

export async function sha256(bytes: Uint8Array): Promise<string> {
  const digest = await crypto.subtle.digest('SHA-256', bytes as Uint8Array<ArrayBuffer>);
  return [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, '0')).join('');
}

export async function tinyShakespeare(base: string): Promise<Uint8Array> {
  const tried: string[] = [];
  for (const url of [new URL('data/tinyshakespeare.txt', new URL(base, location.href)).href, TINY_SHAKESPEARE_URL]) {
    try {
      const r = await fetch(url);
      if (!r.ok) {
        tried.push(`${url}: HTTP ${r.status}`);
        continue;
      }
      const bytes = new Uint8Array(await r.arrayBuffer());
      const sum = await sha256(bytes);
      if (sum !== TINY_SHAKESPEARE_SHA256) {
        tried.push(`${url}: sha256 ${sum.slice(0, 12)}… is not TinyShakespeare's`);
        continue;
      }
      return bytes;
    } catch (e) {
      tried.push(`${url}: ${e instanceof Error ? e.message : String(e)}`);
    }
  }
  throw new Error(`could not load TinyShakespeare (${tried.join('; ')})`);
}

export interface HfRequest {
  api: string; // https://datasets-server.huggingface.co, or a stand-in
  dataset: string;
  config: string;
  split: string;
  column: string;
  budgetBytes: number;
}

export class HfError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'HfError';
  }
}

/**
 * Reads rows page by page (100 per request, the API's maximum) and joins the text of one column
 * with blank lines until the size budget is reached or the split ends.
 */
export async function loadHfDataset(
  req: HfRequest,
  onProgress: (bytes: number, rows: number) => void,
  signal?: AbortSignal,
): Promise<Uint8Array> {
  const enc = new TextEncoder();
  const parts: Uint8Array[] = [];
  let bytes = 0;
  let rows = 0;
  let total = Infinity;
  const name = `${req.dataset} (config ${req.config}, split ${req.split})`;
  while (bytes < req.budgetBytes && rows < total) {
    const url = new URL('rows', req.api.endsWith('/') ? req.api : req.api + '/');
    url.search = new URLSearchParams({
      dataset: req.dataset,
      config: req.config,
      split: req.split,
      offset: String(rows),
      length: '100',
    }).toString();
    let r: Response;
    try {
      r = await fetch(url, { signal: signal ?? null });
    } catch (e) {
      if (signal?.aborted) throw new HfError('stopped');
      throw new HfError(
        `could not reach ${url.origin} (no network, or the server refused the request): ${e instanceof Error ? e.message : String(e)}`,
      );
    }
    let body: {
      error?: string;
      rows?: { row: Record<string, unknown> }[];
      num_rows_total?: number;
      features?: { name: string }[];
    };
    try {
      body = await r.json();
    } catch {
      throw new HfError(`${url.origin} answered HTTP ${r.status} with something that is not JSON`);
    }
    if (!r.ok) {
      const why = body.error ?? `HTTP ${r.status}`;
      if (r.status === 401 || r.status === 403 || /auth|private|gated/i.test(why))
        throw new HfError(`${name} is private or gated: ${why}`);
      if (r.status === 404)
        throw new HfError(`${name} was not found (check the dataset, config and split names): ${why}`);
      throw new HfError(`loading ${name} failed: ${why}`);
    }
    const page = body.rows ?? [];
    total = body.num_rows_total ?? rows + page.length;
    if (rows === 0 && page.length > 0 && !(req.column in page[0]!.row)) {
      const cols = Object.keys(page[0]!.row).join(', ');
      throw new HfError(`${name} has no column '${req.column}' (columns: ${cols})`);
    }
    if (page.length === 0) break;
    for (const { row } of page) {
      const v = row[req.column];
      if (typeof v !== 'string') continue;
      const b = enc.encode((bytes > 0 ? '\n\n' : '') + v);
      parts.push(b);
      bytes += b.length;
      if (bytes >= req.budgetBytes) break;
    }
    rows += page.length;
    onProgress(bytes, rows);
  }
  if (bytes === 0) throw new HfError(`${name}: column '${req.column}' holds no text`);
  const out = new Uint8Array(bytes);
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out.subarray(0, Math.min(bytes, req.budgetBytes));
}
