// A real MCP server for the end-to-end suite, built on the official TypeScript SDK
// (`@modelcontextprotocol/sdk`) over its Streamable HTTP transport, on loopback.
// Stateful: each client session gets its own transport and server, as the SDK's own
// examples do. Its tools succeed (`echo`, read-only), fail (`fail`, `isError`),
// stream progress (`count`), hang until cancelled (`slow`), destroy (`wipe`,
// `destructiveHint`) and answer with structured content (`measure`). Every execution
// and cancellation is recorded; `forget()` drops every session, as a restart would.

import { createServer } from 'node:http';
import { randomUUID } from 'node:crypto';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import * as z from 'zod';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** The tools, recording into `record`. */
function tools(server, record) {
  const ran = (tool, args) => record.executions.push({ tool, args, at: Date.now() });
  server.registerTool('echo', {
    description: 'Echoes the text back',
    inputSchema: { text: z.string() },
    annotations: { readOnlyHint: true },
  }, async ({ text }) => {
    ran('echo', { text });
    return { content: [{ type: 'text', text: `echo: ${text}` }] };
  });
  server.registerTool('fail', {
    description: 'Always fails',
    inputSchema: {},
  }, async () => {
    ran('fail', {});
    return { content: [{ type: 'text', text: 'the disk is on fire' }], isError: true };
  });
  server.registerTool('count', {
    description: 'Counts to n, reporting progress',
    inputSchema: { n: z.number().int().min(1).max(10) },
  }, async ({ n }, extra) => {
    ran('count', { n });
    const token = extra._meta?.progressToken;
    for (let i = 1; i <= n; i++) {
      if (token !== undefined) {
        await extra.sendNotification({ method: 'notifications/progress', params: { progressToken: token, progress: i, total: n } });
      }
      await sleep(20);
    }
    return { content: [{ type: 'text', text: `counted to ${n}` }] };
  });
  server.registerTool('slow', {
    description: 'Takes a minute unless cancelled',
    inputSchema: {},
  }, async (_args, extra) => {
    ran('slow', {});
    await new Promise((resolve) => {
      const timer = setTimeout(resolve, 60_000);
      extra.signal.addEventListener('abort', () => {
        clearTimeout(timer);
        record.cancelled.push({ at: Date.now(), reason: String(extra.signal.reason ?? '') });
        resolve();
      });
    });
    return { content: [{ type: 'text', text: 'done slowly' }] };
  });
  server.registerTool('wipe', {
    description: 'Wipes the named disk',
    inputSchema: { disk: z.string() },
    annotations: { destructiveHint: true, readOnlyHint: false },
  }, async ({ disk }) => {
    ran('wipe', { disk });
    return { content: [{ type: 'text', text: `wiped ${disk}` }] };
  });
  server.registerTool('measure', {
    description: 'Measures a thing',
    inputSchema: { thing: z.string() },
    outputSchema: { cm: z.number() },
  }, async ({ thing }) => {
    ran('measure', { thing });
    const structuredContent = { cm: thing.length };
    return { content: [{ type: 'text', text: JSON.stringify(structuredContent) }], structuredContent };
  });
}

/** Starts the server; `token`, when given, is the bearer every request must carry. */
export async function startMcpServer({ token } = {}) {
  const record = { executions: [], cancelled: [], sessions: 0, requests: [] };
  const sessions = new Map();
  async function serve(req, res) {
    if (token && req.headers.authorization !== `Bearer ${token}`) {
      res.writeHead(401, { 'content-type': 'application/json' }).end('{"error":"unauthorized"}');
      return;
    }
    let raw = '';
    for await (const part of req) raw += part;
    const body = raw ? JSON.parse(raw) : undefined;
    record.requests.push({ method: body?.method, session: req.headers['mcp-session-id'], at: Date.now() });
    const id = req.headers['mcp-session-id'];
    let transport = id ? sessions.get(id) : undefined;
    if (!transport && !id && req.method === 'POST' && isInitializeRequest(body)) {
      transport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (sid) => {
          record.sessions += 1;
          sessions.set(sid, transport);
        },
      });
      const server = new McpServer({ name: 'helix-e2e', version: '1.0.0' });
      tools(server, record);
      await server.connect(transport);
    }
    if (!transport) {
      res.writeHead(id ? 404 : 400, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32000, message: 'unknown session' }, id: null }));
      return;
    }
    await transport.handleRequest(req, res, body);
  }
  const http = createServer((req, res) => {
    serve(req, res).catch((err) => {
      if (!res.headersSent) res.writeHead(500).end(String(err));
    });
  });
  await new Promise((resolve) => http.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${http.address().port}/mcp`;
  return {
    url,
    record,
    ran: (tool) => record.executions.filter((e) => e.tool === tool),
    /** Drops every session, as a restarted server would have none. */
    forget: () => sessions.clear(),
    close: async () => {
      for (const transport of sessions.values()) await transport.close().catch(() => {});
      http.closeAllConnections?.();
      await new Promise((resolve) => http.close(resolve));
    },
  };
}
