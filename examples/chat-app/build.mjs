// Bundles src/app.js (with the AI SDK) into dist/app.js:  node examples/chat-app/build.mjs
import { build } from 'esbuild';
import { copyFileSync, mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
mkdirSync(join(here, 'dist'), { recursive: true });
copyFileSync(join(here, 'index.html'), join(here, 'dist', 'index.html'));
await build({
  entryPoints: [join(here, 'src', 'app.js')],
  outfile: join(here, 'dist', 'app.js'),
  bundle: true,
  format: 'esm',
  target: 'es2022',
  minify: true,
  logLevel: 'warning',
});
