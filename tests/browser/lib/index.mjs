// The browser test harness: a static server with switchable cross-origin isolation and a
// headless Chromium launcher that collects page errors. See tests/browser/README.md.
export { startServer, MIME_TYPES, ISOLATION_HEADERS } from './server.mjs';
export { launchChromium, watchPage, assertNoErrors, CHROMIUM, BASE_ARGS, WEBGPU_ARGS } from './chromium.mjs';
