// The run's autosave in the origin-private file system (OPFS): survives a reload or a crash of
// the tab, stays on this device, and needs no permission prompt. The same store, in a folder of
// its own, remembers the GPT-2 model folder the Fine-tune panel was given (remembered below).
//
// createWritable() writes to a swap file and replaces the original only when the stream is
// closed, so a crash mid-write leaves the previous version intact (the same promise as the
// engine's write-to-temporary-then-rename for checkpoint files).

const AUTOSAVE = 'posttrainllm';

async function root(folder = AUTOSAVE): Promise<FileSystemDirectoryHandle> {
  const dir = await navigator.storage.getDirectory();
  return dir.getDirectoryHandle(folder, { create: true });
}

export async function write(name: string, bytes: Uint8Array, folder = AUTOSAVE): Promise<void> {
  const file = await (await root(folder)).getFileHandle(name, { create: true });
  const writable = await file.createWritable();
  await writable.write(bytes as Uint8Array<ArrayBuffer>);
  await writable.close();
}

export async function read(name: string, folder = AUTOSAVE): Promise<Uint8Array | null> {
  try {
    const file = await (await root(folder)).getFileHandle(name);
    return new Uint8Array(await (await file.getFile()).arrayBuffer());
  } catch {
    return null;
  }
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
  for (const f of files) await write(prefix + f.name, f.bytes, GPT2);
  const manifest = { label, prefix, files: files.map((f) => f.name) };
  await write(MANIFEST, new TextEncoder().encode(JSON.stringify(manifest)), GPT2);
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
