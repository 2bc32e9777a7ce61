// A Node worker_threads host for serveEngine (the same protocol a browser Web Worker speaks).
import { parentPort } from 'node:worker_threads';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const { serveEngine } = await import(path.join(root, 'web', 'engine', 'dist', 'index.js'));
serveEngine(parentPort); // Node's MessagePort is an EventTarget with postMessage, like a worker scope
