// A static file server for browser tests: serves folders on 127.0.0.1 at a free port, with the
// MIME types browsers insist on (application/wasm for WebAssembly streaming compilation,
// text/javascript for module and worker scripts) and, per server, the cross-origin isolation
// headers (COOP same-origin + COEP require-corp) that SharedArrayBuffer and wasm threads need.
//
//   import { startServer } from "./lib/server.mjs";
//   const server = await startServer({ mounts: { "/": "tests/browser/pages", "/wasm": "build-wasm" }, isolated: true });
//   await page.goto(server.url + "/engine.html");
//   await server.close();
//
// Only GET and HEAD. Paths are resolved inside their mount (no `..` escape). No caching headers
// (every test run sees the current files). Node's http module only: no dependency.
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';

export const MIME_TYPES = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.cjs': 'text/javascript; charset=utf-8',
  '.map': 'application/json; charset=utf-8',
  '.json': 'application/json; charset=utf-8',
  '.wasm': 'application/wasm',
  '.css': 'text/css; charset=utf-8',
  '.txt': 'text/plain; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.wgsl': 'text/plain; charset=utf-8',
  '.tinygpt': 'application/octet-stream',
  '.bin': 'application/octet-stream',
};

/** The headers that make a page cross-origin isolated (self.crossOriginIsolated === true). */
export const ISOLATION_HEADERS = {
  'Cross-Origin-Opener-Policy': 'same-origin',
  'Cross-Origin-Embedder-Policy': 'require-corp',
  'Cross-Origin-Resource-Policy': 'same-origin',
};

/**
 * Starts a server.
 * @param {object} options
 * @param {Record<string, string>} options.mounts URL prefix -> folder, e.g. {"/": "pages", "/wasm": "build-wasm"};
 *   the longest matching prefix wins.
 * @param {boolean} [options.isolated=true] send COOP/COEP (cross-origin isolated pages) or not.
 * @param {Record<string, string>} [options.headers] extra headers on every response.
 * @param {number} [options.port=0] 0 = a free port.
 * @returns {Promise<{url: string, port: number, isolated: boolean, requests: string[], close: () => Promise<void>}>}
 */
export async function startServer({ mounts, isolated = true, headers = {}, port = 0 } = {}) {
  if (!mounts || Object.keys(mounts).length === 0)
    throw new Error("startServer: give at least one mount, e.g. {'/': 'pages'}");
  const table = Object.entries(mounts)
    .map(([prefix, dir]) => {
      const p = '/' + prefix.replace(/^\/+|\/+$/g, '');
      const root = path.resolve(dir);
      if (!fs.existsSync(root)) throw new Error(`startServer: the folder for ${p} does not exist: ${root}`);
      return { prefix: p === '/' ? '' : p, root };
    })
    .sort((a, b) => b.prefix.length - a.prefix.length);
  const requests = [];

  const server = http.createServer((req, res) => {
    const common = { ...(isolated ? ISOLATION_HEADERS : {}), 'Cache-Control': 'no-store', ...headers };
    const fail = (status, message) => {
      res.writeHead(status, { ...common, 'Content-Type': 'text/plain; charset=utf-8' });
      res.end(message + '\n');
    };
    if (req.method !== 'GET' && req.method !== 'HEAD') return fail(405, `method ${req.method} not allowed`);
    let pathname;
    try {
      pathname = decodeURIComponent(new URL(req.url ?? '/', 'http://localhost').pathname);
    } catch {
      return fail(400, 'bad URL');
    }
    requests.push(pathname);
    const mount = table.find((m) => pathname === m.prefix || pathname.startsWith(m.prefix + '/'));
    if (!mount) {
      if (pathname === '/favicon.ico') {
        res.writeHead(204, common);
        return res.end();
      }
      return fail(404, `not found: ${pathname}`);
    }
    let file = path.resolve(mount.root, '.' + pathname.slice(mount.prefix.length));
    if (file !== mount.root && !file.startsWith(mount.root + path.sep)) return fail(403, 'outside the served folder');
    let stat;
    try {
      stat = fs.statSync(file);
      if (stat.isDirectory()) {
        file = path.join(file, 'index.html');
        stat = fs.statSync(file);
      }
    } catch {
      // Browsers ask for /favicon.ico on their own: an empty answer, not a 404 in the console.
      if (pathname === '/favicon.ico') {
        res.writeHead(204, common);
        return res.end();
      }
      return fail(404, `not found: ${pathname}`);
    }
    const type = MIME_TYPES[path.extname(file).toLowerCase()] ?? 'application/octet-stream';
    res.writeHead(200, { ...common, 'Content-Type': type, 'Content-Length': stat.size });
    if (req.method === 'HEAD') return res.end();
    fs.createReadStream(file)
      .on('error', () => res.destroy())
      .pipe(res);
  });
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', resolve);
  });
  const actual = /** @type {import("node:net").AddressInfo} */ (server.address()).port;
  return {
    url: `http://127.0.0.1:${actual}`,
    port: actual,
    isolated,
    requests,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections?.();
        server.close(() => resolve());
      }),
  };
}
