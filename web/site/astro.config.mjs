// The playground site: static files (astro build -> dist/), served with cross-origin isolation so
// that the threaded WebAssembly engine can use SharedArrayBuffer (docs/site.md).
import { defineConfig } from 'astro/config';
import { fileURLToPath } from 'node:url';

// COOP + COEP make the page cross-origin isolated. The same pair is in public/_headers for
// static hosts; without them the page still works, on single-thread WebAssembly.
const isolation = {
  'Cross-Origin-Opener-Policy': 'same-origin',
  'Cross-Origin-Embedder-Policy': 'require-corp',
};
const repo = fileURLToPath(new URL('../..', import.meta.url));
// The WGSL files of the WebGPU package, for the import.meta.glob of src/client/kernels.ts (a glob
// takes a folder or an alias, not a package name).
const kernels = fileURLToPath(new URL('kernels', import.meta.resolve('@posttrainllm/webgpu/package.json')));

// Markdown from the repository's docs/ (the /learn/model/ page) links to other files of the
// repository by relative paths, which do not exist on the site: keep the link text, drop the link.
function repoLinksAsText() {
  const relative = (href) => typeof href === 'string' && !/^([a-z]+:|#|\/)/i.test(href);
  const walk = (node) => {
    if (!node.children) return;
    node.children = node.children.flatMap((child) => {
      walk(child);
      return child.type === 'element' && child.tagName === 'a' && relative(child.properties?.href)
        ? child.children
        : [child];
    });
  };
  return walk;
}

export default defineConfig({
  output: 'static',
  markdown: { rehypePlugins: [repoLinksAsText] },
  server: { headers: isolation },
  vite: {
    resolve: { alias: { '@posttrainllm/webgpu/kernels': kernels } },
    server: { headers: isolation, fs: { allow: [repo] } },
    preview: { headers: isolation },
    // The engine loads ptl_engine.js with importScripts, which only classic workers have.
    // (The engine's Node-only dynamic imports are inlined as stubs: an iife has one chunk.)
    worker: { format: 'iife', rollupOptions: { output: { inlineDynamicImports: true } } },
    build: { target: 'es2022' },
  },
});
