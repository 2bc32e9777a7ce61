// The run's autosave in the origin-private file system (OPFS): survives a reload or a crash of
// the tab, stays on this device, and needs no permission prompt. The same store, in a folder of
// its own, remembers the GPT-2 model folder the Fine-tune panel was given (remembered below).
//
// The run is one file, autosave.ptlrun: its state (settings, metrics, samples) and its checkpoint,
// each with a SHA-256 in a fixed header. One file because createWritable() writes to a swap file
// and replaces the original only when the stream is closed: a crash, a closed tab or a full quota
// mid-write leaves the previous autosave whole (the same promise as the engine's
// write-to-temporary-then-rename for checkpoint files), where two files (state, checkpoint) could
// end up from two different saves. The checksums catch what the swap cannot: bytes changed or cut
// after they were written.
//
// The run's training text is a file of its own, named by its hash (autosave-corpus-<sha>.bin),
// written once per text; the previous text's file is removed only after a run that no longer
// needs it is saved, so the previous autosave always keeps its text.
//
//   0   8  "ptlrun\0\x01" (signature and version)
//   8   8  u64 LE  state JSON length J
//   16  8  u64 LE  checkpoint length C
//   24 32  SHA-256 of the state JSON
//   56 32  SHA-256 of the checkpoint
//   88  J  state JSON (UTF-8)
//   88+J C checkpoint (.tinygpt, with AdamW moments)

export const RUN_FILE = 'autosave.ptlrun';
const MAGIC = [0x70, 0x74, 0x6c, 0x72, 0x75, 0x6e, 0x00, 0x01];
const HEADER = 88;
// An earlier layout: the state and the checkpoint in two files, the text in a third. Still
// restored; removed once a run is saved in the layout above.
const LEGACY = { state: 'autosave.json', checkpoint: 'autosave.tinygpt', corpus: 'autosave-corpus.bin' };

/** A damaged or unreadable autosave: the message says what is wrong with it. */
export class AutosaveError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'AutosaveError';
  }
}

const AUTOSAVE = 'posttrainllm';

async function root(folder = AUTOSAVE): Promise<FileSystemDirectoryHandle> {
  const dir = await navigator.storage.getDirectory();
  return dir.getDirectoryHandle(folder, { create: true });
}

export async function sha256(bytes: Uint8Array): Promise<Uint8Array> {
  return new Uint8Array(await crypto.subtle.digest('SHA-256', bytes as Uint8Array<ArrayBuffer>));
}
const hex = (b: Uint8Array) => Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');

/**
 * Writes `chunks` as the file `name`, all or nothing: a failed write (a full quota) aborts the
 * stream, which discards its swap file, so the previous version stays as it was.
 */
async function write(name: string, chunks: Uint8Array[], folder = AUTOSAVE): Promise<void> {
  const file = await (await root(folder)).getFileHandle(name, { create: true });
  const writable = await file.createWritable();
  try {
    for (const c of chunks) await writable.write(c as Uint8Array<ArrayBuffer>);
  } catch (e) {
    await writable.abort().catch(() => undefined);
    throw e;
  }
  await writable.close();
}

async function read(name: string, folder = AUTOSAVE): Promise<Uint8Array | null> {
  let file: FileSystemFileHandle;
  try {
    file = await (await root(folder)).getFileHandle(name);
  } catch {
    return null; // not there
  }
  return new Uint8Array(await (await file.getFile()).arrayBuffer());
}

async function remove(name: string): Promise<void> {
  await (await root()).removeEntry(name).catch(() => undefined);
}

/** What a saved run holds besides its checkpoint: the page's state, and the text's file. */
export interface SavedMeta {
  variant?: string;
  state: unknown;
  /** The training text's file and SHA-256 (hex); absent when the run had no text. */
  corpus?: { file: string; sha256: string; bytes: number };
}

/** The training text's file name (written once per text). */
export async function writeCorpus(bytes: Uint8Array): Promise<SavedMeta['corpus']> {
  const sha = hex(await sha256(bytes));
  const file = `autosave-corpus-${sha.slice(0, 16)}.bin`;
  await write(file, [bytes]);
  return { file, sha256: sha, bytes: bytes.length };
}

/** Saves the run (state and checkpoint in one file), then removes the files it no longer needs. */
export async function writeRun(meta: SavedMeta, checkpoint: Uint8Array): Promise<void> {
  const json = new TextEncoder().encode(JSON.stringify(meta));
  const header = new Uint8Array(HEADER);
  header.set(MAGIC, 0);
  const view = new DataView(header.buffer);
  view.setBigUint64(8, BigInt(json.length), true);
  view.setBigUint64(16, BigInt(checkpoint.length), true);
  header.set(await sha256(json), 24);
  header.set(await sha256(checkpoint), 56);
  await write(RUN_FILE, [header, json, checkpoint]);
  const dir = await root();
  const names: string[] = [];
  for await (const name of (dir as unknown as { keys(): AsyncIterable<string> }).keys()) names.push(name);
  for (const name of names) {
    const stale =
      Object.values(LEGACY).includes(name) ||
      (name.startsWith('autosave-corpus-') && name.endsWith('.bin') && name !== meta.corpus?.file);
    if (stale) await remove(name);
  }
}

/**
 * The saved run: null when there is none; an AutosaveError naming the damage when it is cut
 * short, changed since it was written, or not an autosave at all.
 */
export async function readRun(): Promise<{
  meta: SavedMeta;
  checkpoint: Uint8Array;
  corpus: Uint8Array | null;
} | null> {
  const bytes = await read(RUN_FILE);
  if (!bytes) return readLegacy();
  const size = bytes.length.toLocaleString('en');
  if (MAGIC.some((b, i) => i < bytes.length && bytes[i] !== b))
    throw new AutosaveError(
      `the autosave file (${size} bytes) does not start with the autosave's signature: it is not an autosave, or was overwritten`,
    );
  if (bytes.length < HEADER)
    throw new AutosaveError(`the autosave is cut short (${size} bytes, less than its ${HEADER}-byte header)`);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const J = Number(view.getBigUint64(8, true));
  const C = Number(view.getBigUint64(16, true));
  const want = HEADER + J + C;
  if (bytes.length !== want)
    throw new AutosaveError(
      `the autosave is ${size} bytes where its header says ${want.toLocaleString('en')}: ` +
        (bytes.length < want ? 'it was cut short' : 'it has bytes after its end'),
    );
  const json = bytes.subarray(HEADER, HEADER + J);
  const checkpoint = bytes.subarray(HEADER + J);
  const same = (a: Uint8Array, at: number) => a.every((x, i) => x === bytes[at + i]);
  if (!same(await sha256(json), 24))
    throw new AutosaveError(
      "the autosave's run state does not match its SHA-256: its bytes changed after they were written",
    );
  if (!same(await sha256(checkpoint), 56))
    throw new AutosaveError(
      "the autosave's checkpoint does not match its SHA-256: its bytes changed after they were written",
    );
  let meta: SavedMeta;
  try {
    meta = JSON.parse(new TextDecoder().decode(json)) as SavedMeta;
  } catch (e) {
    throw new AutosaveError(`the autosave's run state is not JSON (${e instanceof Error ? e.message : String(e)})`);
  }
  return { meta, checkpoint, corpus: await readCorpus(meta.corpus) };
}

/** The run's training text, or null when it is missing or not the text the run saved. */
async function readCorpus(c: SavedMeta['corpus']): Promise<Uint8Array | null> {
  if (!c) return null;
  const bytes = await read(c.file);
  if (!bytes || bytes.length !== c.bytes || hex(await sha256(bytes)) !== c.sha256) return null;
  return bytes;
}

async function readLegacy(): Promise<Awaited<ReturnType<typeof readRun>>> {
  const saved = await read(LEGACY.state);
  const checkpoint = await read(LEGACY.checkpoint);
  if (!saved && !checkpoint) return null;
  if (!saved || !checkpoint)
    throw new AutosaveError(`the autosave is incomplete: ${saved ? LEGACY.checkpoint : LEGACY.state} is missing`);
  let meta: SavedMeta;
  try {
    meta = JSON.parse(new TextDecoder().decode(saved)) as SavedMeta;
  } catch (e) {
    throw new AutosaveError(`the autosave's run state is not JSON (${e instanceof Error ? e.message : String(e)})`);
  }
  return { meta, checkpoint, corpus: await read(LEGACY.corpus) };
}

export async function clear(folder = AUTOSAVE): Promise<void> {
  const dir = await navigator.storage.getDirectory();
  await dir.removeEntry(folder, { recursive: true }).catch(() => undefined);
}

// ---------------------------------------------------------------------------------------------
// The GPT-2 folder of the Fine-tune panel: its files, then a manifest naming them, written last,
// so that a manifest is only ever there for a complete set (a crash mid-way leaves the previous
// manifest, or none, and a replaced set's files are only removed once the new manifest is in).

const GPT2 = 'posttrainllm-gpt2';
const MANIFEST = 'folder.json';

export interface RememberedFolder {
  label: string;
  files: string[];
}

export async function rememberFolder(label: string, files: { name: string; bytes: Uint8Array }[]): Promise<void> {
  const old = await recalledManifest();
  // A new set goes in beside the old under fresh names (a prefix per set), then the manifest
  // switches to it.
  const prefix = `${Date.now().toString(36)}-`;
  for (const f of files) await write(prefix + f.name, [f.bytes], GPT2);
  const manifest = { label, prefix, files: files.map((f) => f.name) };
  await write(MANIFEST, [new TextEncoder().encode(JSON.stringify(manifest))], GPT2);
  if (old) {
    const dir = await root(GPT2);
    for (const name of old.files) await dir.removeEntry(old.prefix + name).catch(() => undefined);
  }
}

async function recalledManifest(): Promise<(RememberedFolder & { prefix: string }) | null> {
  const m = await read(MANIFEST, GPT2);
  if (!m) return null;
  try {
    return JSON.parse(new TextDecoder().decode(m)) as RememberedFolder & { prefix: string };
  } catch {
    return null;
  }
}

/** The remembered folder's label and file names, without reading the files. */
export async function rememberedFolder(): Promise<RememberedFolder | null> {
  const m = await recalledManifest();
  return m ? { label: m.label, files: m.files } : null;
}

/** The remembered folder's files (null when one is missing: the set is not usable). */
export async function recallFolder(): Promise<{ label: string; files: { name: string; bytes: Uint8Array }[] } | null> {
  const m = await recalledManifest();
  if (!m) return null;
  const files = [];
  for (const name of m.files) {
    const bytes = await read(m.prefix + name, GPT2);
    if (!bytes) return null;
    files.push({ name, bytes });
  }
  return { label: m.label, files };
}

export async function forgetFolder(): Promise<void> {
  await clear(GPT2);
}
