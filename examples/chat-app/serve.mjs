// Serves dist/ and forwards /v1/* to the worker, so the page and the API share one
// origin (as behind one domain in production, or a dev server's proxy):
//   WORKER_URL=http://127.0.0.1:8787 PORT=5173 node examples/chat-app/serve.mjs
import { createServer } from 'node:http';
import { readFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const worker = process.env.WORKER_URL ?? 'http://127.0.0.1:8787';
const port = Number(process.env.PORT ?? 5173);
const files = { '/': ['index.html', 'text/html'], '/app.js': ['app.js', 'text/javascript'] };

createServer(async (req, res) => {
  try {
    const path = new URL(req.url, 'http://x').pathname;
    if (path.startsWith('/v1/')) {
      const body = ['GET', 'HEAD'].includes(req.method) ? undefined : Readable.toWeb(req);
      const headers = { ...req.headers };
      delete headers.host;
      const upstream = await fetch(worker + req.url, { method: req.method, headers, body, duplex: 'half' });
      // fetch has decoded the body: its encoding and length no longer apply.
      const out = Object.fromEntries(upstream.headers);
      delete out['content-encoding'];
      delete out['content-length'];
      res.writeHead(upstream.status, out);
      if (upstream.body) Readable.fromWeb(upstream.body).pipe(res);
      else res.end();
      return;
    }
    const file = files[path];
    if (!file) return res.writeHead(404).end('not found');
    res.writeHead(200, { 'content-type': `${file[1]}; charset=utf-8` });
    res.end(await readFile(join(here, 'dist', file[0])));
  } catch (e) {
    if (!res.headersSent) res.writeHead(502);
    res.end(String(e));
  }
}).listen(port, '127.0.0.1', () => console.log(`[chat-app] http://127.0.0.1:${port}/  (API: ${worker})`));
