#!/usr/bin/env node
// Lints and formats the project's Python (python_ref/, tests/python/, bench/, scripts/) with Ruff,
// run from its WebAssembly build (npm @astral-sh/ruff-wasm-nodejs, a dev dependency of web/):
// Debian 12 has no ruff package, and this needs no Python tooling beyond the files themselves.
//
//   node scripts/ruff.mjs            report lint findings and files whose format differs (exit 1 if any)
//   node scripts/ruff.mjs --fix      rewrite the files in Ruff's format (lint findings are still reported)
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const args = process.argv.slice(2);
if (args.some((a) => a === '-h' || a === '--help')) {
  console.log(readFileSync(fileURLToPath(import.meta.url), 'utf8').split('\n').slice(1, 7).map((l) => l.replace(/^\/\/ ?/, '')).join('\n'));
  process.exit(0);
}
const unknown = args.filter((a) => a !== '--fix');
if (unknown.length) {
  console.error(`ruff.mjs: unknown argument ${unknown[0]} (see --help)`);
  process.exit(2);
}
const fix = args.includes('--fix');

let ruff;
try {
  ruff = createRequire(path.join(root, 'web', 'package.json'))('@astral-sh/ruff-wasm-nodejs');
} catch {
  console.error('ruff.mjs: @astral-sh/ruff-wasm-nodejs is not installed: run scripts/setup.sh (npm ci in web/)');
  process.exit(2);
}
// The settings of pyproject.toml's [tool.ruff], which the WebAssembly build cannot read itself.
const settings = {
  'line-length': 120,
  lint: { select: ['E', 'F', 'W'], ignore: ['E501', 'E731', 'E741'] },
};
const ws = new ruff.Workspace(settings, ruff.PositionEncoding.Utf16);

// Tracked Python files: *.py, and scripts whose first line names python.
const tracked = execFileSync('git', ['ls-files', '-z'], { cwd: root, encoding: 'utf8' }).split('\0').filter(Boolean);
const files = tracked.filter((f) => {
  if (f.endsWith('.py')) return true;
  if (path.extname(f) !== '') return false;
  try {
    return /^#!.*python/.test(readFileSync(path.join(root, f), 'utf8').split('\n', 1)[0]);
  } catch {
    return false;
  }
});

let problems = 0;
for (const f of files) {
  const file = path.join(root, f);
  const src = readFileSync(file, 'utf8');
  let formatted;
  try {
    formatted = ws.format(src);
  } catch (e) {
    console.log(`${f}: cannot be parsed: ${e}`);
    problems++;
    continue;
  }
  if (formatted !== src) {
    if (fix) writeFileSync(file, formatted);
    else {
      console.log(`${f}: not in Ruff's format (node scripts/ruff.mjs --fix)`);
      problems++;
    }
  }
  for (const d of ws.check(fix ? formatted : src)) {
    console.log(`${f}:${d.start_location.row}:${d.start_location.column}: ${d.code ?? ''} ${d.message}`);
    problems++;
  }
}
console.log(`ruff ${ruff.Workspace.version()}: ${files.length} files, ${problems} problem(s)`);
process.exit(problems ? 1 : 0);
