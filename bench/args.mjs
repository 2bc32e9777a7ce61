// Options of the Node bench scripts: "--name value", or a bare "--name" for the names in `flags`.
// --help (or -h) prints the script's header comment; a name the script does not know, or a value
// missing, is an error (exit 2) before anything is measured, never a run with the defaults.
import fs from 'node:fs';
import { fileURLToPath } from 'node:url';

export function benchArgs(scriptUrl, known, flags = []) {
  const file = fileURLToPath(scriptUrl);
  const name = `bench/${file.split('/').pop()}`;
  const usage = () => {
    const lines = fs.readFileSync(file, 'utf8').split('\n');
    const head = [];
    for (const l of lines.slice(lines[0].startsWith('#!') ? 1 : 0)) {
      if (!l.startsWith('//')) break;
      head.push(l.replace(/^\/\/ ?/, ''));
    }
    return head.join('\n');
  };
  const args = {};
  const argv = process.argv.slice(2);
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '-h' || a === '--help') {
      console.log(usage());
      process.exit(0);
    }
    const key = a.startsWith('--') ? a.slice(2) : null;
    if (key === null || (!known.includes(key) && !flags.includes(key))) {
      console.error(
        `${name}: ${key === null ? `unexpected argument '${a}'` : `unknown option '${a}'`} (options: ${[...known, ...flags].map((k) => `--${k}`).join(' ')}; see --help)`,
      );
      process.exit(2);
    }
    if (flags.includes(key) && (argv[i + 1] === undefined || argv[i + 1].startsWith('--'))) {
      args[key] = true;
      continue;
    }
    if (argv[i + 1] === undefined) {
      console.error(`${name}: ${a} needs a value`);
      process.exit(2);
    }
    args[key] = argv[++i];
  }
  return args;
}
