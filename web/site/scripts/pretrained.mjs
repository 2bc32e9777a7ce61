// Which pretrained model a site build serves, and putting it into place (copy-assets.mjs, step 6).
//
// The source: $PTL_PRETRAINED_MODEL when set ("none" builds without a model), else the model
// shipped in the repository, models/shakespeare.tinygpt, when it is there. The copy in public/
// follows the source on every build: copied again each time (a changed source never leaves an old
// copy behind) and removed when there is no source, so the page's banner never offers a stale file.
import { copyFileSync, existsSync, mkdirSync, rmSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';

/** The model shipped in the repository, relative to its root. */
export const SHIPPED_MODEL = 'models/shakespeare.tinygpt';
/** Where the built site serves it, relative to public/ (and to the site's base URL). */
export const SERVED_MODEL = 'models/pretrained.tinygpt';

/**
 * The pretrained model to build in: `{ path, origin }` (origin says where the choice came from),
 * or null for none. Throws when $PTL_PRETRAINED_MODEL names a file that is not there.
 */
export function pretrainedSource({ env = process.env, repo }) {
  const fromEnv = env.PTL_PRETRAINED_MODEL;
  if (fromEnv === 'none') return null;
  if (fromEnv) {
    if (!existsSync(fromEnv) || !statSync(fromEnv).isFile())
      throw new Error(`PTL_PRETRAINED_MODEL=${fromEnv} does not exist (set it to a .tinygpt file, or to "none")`);
    return { path: fromEnv, origin: 'PTL_PRETRAINED_MODEL' };
  }
  const shipped = join(repo, SHIPPED_MODEL);
  return existsSync(shipped) ? { path: shipped, origin: SHIPPED_MODEL } : null;
}

/** Copies `source` (a path, or null for none) to `dest`, or removes `dest` when there is none. */
export function placePretrained(source, dest) {
  if (!source) {
    rmSync(dest, { force: true });
    return false;
  }
  mkdirSync(dirname(dest), { recursive: true });
  copyFileSync(source, dest);
  return true;
}
