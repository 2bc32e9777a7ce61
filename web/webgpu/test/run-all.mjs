// `npm test`: builds what the tests need, runs the Node test files (node --test) and ends with one
// JSON line {"kernels_passed", "kernels_total", "max_step_drift", ...}.
//
// Device: a real Vulkan driver when there is one and VK_ICD_FILENAMES is set by the caller (or
// PTL_WEBGPU_NATIVE=1); otherwise SwiftShader from the chromium package (CPU, slow, tiny shapes).
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';

import { OUT, PKG, REPO } from './helpers.mjs';

const env = { ...process.env };
const SWIFTSHADER = '/usr/lib/chromium/vk_swiftshader_icd.json';
if (!env.VK_ICD_FILENAMES && env.PTL_WEBGPU_NATIVE !== '1') {
  if (!existsSync(SWIFTSHADER)) {
    console.error(`no Vulkan ICD given and no SwiftShader at ${SWIFTSHADER}: apt-get install -y chromium libvulkan1`);
    process.exit(1);
  }
  env.VK_ICD_FILENAMES = SWIFTSHADER;
}
env.XDG_RUNTIME_DIR ??= '/tmp';
// Dawn loads libvulkan.so.1; chromium ships one when the system has none.
const hasLoader = [
  '/usr/lib/x86_64-linux-gnu/libvulkan.so.1',
  '/usr/lib/libvulkan.so.1',
  '/usr/lib64/libvulkan.so.1',
].some(existsSync);
if (!hasLoader && existsSync('/usr/lib/chromium/libvulkan.so.1'))
  env.LD_LIBRARY_PATH = ['/usr/lib/chromium', env.LD_LIBRARY_PATH].filter(Boolean).join(':');

// The native reference: ptl and tests/ptl_program_run (incremental; configures when needed).
const build = env.PTL_BUILD_DIR ?? join(REPO, 'build-gpu');
env.PTL_BUILD_DIR = build;
const sh = (cmd, args) => {
  const r = spawnSync(cmd, args, { stdio: 'inherit', env });
  if (r.status !== 0) {
    console.error(`failed: ${cmd} ${args.join(' ')}`);
    process.exit(r.status ?? 1);
  }
};
const prebuilt =
  !existsSync(join(build, 'CMakeCache.txt')) &&
  existsSync(join(build, 'ptl')) &&
  existsSync(join(build, 'tests', 'ptl_program_run'));
if (!prebuilt) {
  // (A folder holding only the two executables, e.g. copied to a machine without a compiler, is used as it is.)
  if (!existsSync(join(build, 'build.ninja')) && !existsSync(join(build, 'Makefile')))
    sh('cmake', ['-S', REPO, '-B', build, '-G', 'Ninja', '-DCMAKE_BUILD_TYPE=Release']);
  sh('cmake', ['--build', build, '--target', 'ptl', 'ptl_program_run']);
}

// bin/train.mjs (the train-cli test) imports the engine's TypeScript API: its JavaScript, when missing.
if (!existsSync(join(REPO, 'web', 'engine', 'dist', 'index.js')))
  sh(process.execPath, [
    join(REPO, 'web', 'node_modules', 'typescript', 'bin', 'tsc'),
    '-p',
    join(REPO, 'web', 'engine'),
  ]);

rmSync(join(OUT, 'kernels.json'), { force: true });
rmSync(join(OUT, 'train.json'), { force: true });
rmSync(join(OUT, 'generate.json'), { force: true });
rmSync(join(OUT, 'inspect.json'), { force: true });
const files = (
  process.argv.length > 2
    ? process.argv.slice(2)
    : [
        'executor',
        'memory',
        'safetensors',
        'kernels',
        'dropout',
        'generate',
        'inspect',
        'train',
        'train-cli',
        'gpt2',
        'lora',
      ]
).map((f) => join(PKG, 'test', `${f}.test.mjs`));
const r = spawnSync(process.execPath, ['--test', '--test-concurrency=1', '--test-reporter=spec', ...files], {
  stdio: 'inherit',
  env,
  cwd: PKG,
});

const read = (f) => (existsSync(join(OUT, f)) ? JSON.parse(readFileSync(join(OUT, f), 'utf8')) : null);
const k = read('kernels.json');
const t = read('train.json');
const g = read('generate.json');
const ins = read('inspect.json');
console.log(
  JSON.stringify({
    kernels_passed: k?.kernels_passed ?? 0,
    kernels_total: k?.kernels_total ?? 0,
    kernel_cases_passed: k?.cases_passed ?? 0,
    kernel_cases_total: k?.cases_total ?? 0,
    kernel_cases_skipped: k?.cases_skipped ?? 0,
    max_step_drift: t?.max_step_drift ?? null,
    train_steps: t?.steps ?? null,
    generate_equals_ptl_sample: g ? g.greedy?.gpu === g.greedy?.cpu && g.sampled?.gpu === g.sampled?.cpu : null,
    inspect_probs_max_abs: ins?.probs ? Math.max(...ins.probs.map((p) => p.max_abs)) : null,
    resumed_in_ptl: Array.isArray(t?.resumed_steps) && t.resumed_steps.length > 0,
    adapter: t?.adapter ?? null,
  }),
);
process.exit(r.status ?? 1);
