// Builds the console's script (src/main.ts plus @helix-edge/client) into console.js,
// which the `console` feature embeds. The built file is committed, so that a Rust user
// gets the console without Node; the client's tests check it is current.
//   node crates/helix-edge/console/build.mjs [--out FILE]

import { build } from 'esbuild';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const at = process.argv.indexOf('--out');
await build({
  entryPoints: [join(here, 'src', 'main.ts')],
  outfile: at > 0 ? process.argv[at + 1] : join(here, 'console.js'),
  bundle: true,
  format: 'esm',
  target: 'es2022',
  minify: true,
  legalComments: 'none',
  logLevel: 'warning',
});
