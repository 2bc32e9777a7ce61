// The run's autosave in the origin-private file system (OPFS): survives a reload or a crash of
// the tab, stays on this device, and needs no permission prompt.
//
// createWritable() writes to a swap file and replaces the original only when the stream is
// closed, so a crash mid-write leaves the previous version intact (the same promise as the
// engine's write-to-temporary-then-rename for checkpoint files).

async function root(): Promise<FileSystemDirectoryHandle> {
  const dir = await navigator.storage.getDirectory();
  return dir.getDirectoryHandle('posttrainllm', { create: true });
}

export async function write(name: string, bytes: Uint8Array): Promise<void> {
  const file = await (await root()).getFileHandle(name, { create: true });
  const writable = await file.createWritable();
  await writable.write(bytes as Uint8Array<ArrayBuffer>);
  await writable.close();
}

export async function read(name: string): Promise<Uint8Array | null> {
  try {
    const file = await (await root()).getFileHandle(name);
    return new Uint8Array(await (await file.getFile()).arrayBuffer());
  } catch {
    return null;
  }
}

export async function clear(): Promise<void> {
  const dir = await navigator.storage.getDirectory();
  await dir.removeEntry('posttrainllm', { recursive: true }).catch(() => undefined);
}
