// copy-assets.mjs's choice of the pretrained model (scripts/pretrained.mjs), without a browser:
// $PTL_PRETRAINED_MODEL first ("none": no model), else the repository's shipped model; the copy
// the site serves follows its source and goes when there is none.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';

import { SERVED_MODEL, SHIPPED_MODEL, placePretrained, pretrainedSource } from '../scripts/pretrained.mjs';

function tempRepo(t) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ptl-copy-assets-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

test('the source: $PTL_PRETRAINED_MODEL, else models/shakespeare.tinygpt, else none', (t) => {
  const repo = tempRepo(t);
  assert.equal(pretrainedSource({ env: {}, repo }), null, 'no model anywhere: none');

  const shipped = path.join(repo, SHIPPED_MODEL);
  fs.mkdirSync(path.dirname(shipped), { recursive: true });
  fs.writeFileSync(shipped, 'shipped');
  assert.deepEqual(pretrainedSource({ env: {}, repo }), { path: shipped, origin: SHIPPED_MODEL });

  const other = path.join(repo, 'other.tinygpt');
  fs.writeFileSync(other, 'other');
  assert.deepEqual(pretrainedSource({ env: { PTL_PRETRAINED_MODEL: other }, repo }), {
    path: other,
    origin: 'PTL_PRETRAINED_MODEL',
  });
  assert.equal(pretrainedSource({ env: { PTL_PRETRAINED_MODEL: 'none' }, repo }), null, '"none" builds without');
  assert.throws(
    () => pretrainedSource({ env: { PTL_PRETRAINED_MODEL: path.join(repo, 'missing.tinygpt') }, repo }),
    /PTL_PRETRAINED_MODEL=.*missing\.tinygpt does not exist/,
  );
  assert.throws(() => pretrainedSource({ env: { PTL_PRETRAINED_MODEL: repo }, repo }), /does not exist/, 'a folder');
});

test('the served copy follows its source and is removed without one', (t) => {
  const repo = tempRepo(t);
  const src = path.join(repo, 'a.tinygpt');
  const dest = path.join(repo, 'public', SERVED_MODEL);
  fs.writeFileSync(src, 'first');
  assert.equal(placePretrained(src, dest), true);
  assert.equal(fs.readFileSync(dest, 'utf8'), 'first');
  // A changed source replaces the copy, even when the copy looks newer.
  fs.writeFileSync(src, 'second');
  fs.utimesSync(src, new Date(0), new Date(0));
  placePretrained(src, dest);
  assert.equal(fs.readFileSync(dest, 'utf8'), 'second');
  // No source: no stale copy for the banner to point at.
  assert.equal(placePretrained(null, dest), false);
  assert.equal(fs.existsSync(dest), false);
  assert.equal(placePretrained(null, dest), false, 'nothing to remove is fine');
});
