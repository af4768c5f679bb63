// A real MCP server for the end-to-end suite, built on the official TypeScript SDK
// (`@modelcontextprotocol/sdk`) over its Streamable HTTP transport, on loopback.
// Stateful: each client session gets its own transport and server, as the SDK's own
// examples do, its event streams resumable (the SDK's in-memory event store). Its tools
// succeed (`echo`, read-only), fail (`fail`, `isError`), stream progress (`count`),
// hang until cancelled (`slow`), destroy (`wipe`, `destructiveHint`), answer with
// structured content (`measure`) and ask the user (`ask`, an elicitation). Every
// execution, cancellation and elicitation answer is recorded; `forget()` drops every
// session, as a restart would. With `oauth`, the server is also its own authorization
// server, built from the SDK's pieces (metadata, dynamic registration, PKCE, consent
// given at once) and its MCP endpoint takes only the tokens it issued.

import { createServer } from 'node:http';
import { randomUUID } from 'node:crypto';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { ElicitResultSchema, isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import { InMemoryEventStore } from '@modelcontextprotocol/sdk/examples/shared/inMemoryEventStore.js';
import { DemoInMemoryAuthProvider } from '@modelcontextprotocol/sdk/examples/server/demoInMemoryOAuthProvider.js';
import { getOAuthProtectedResourceMetadataUrl, mcpAuthRouter } from '@modelcontextprotocol/sdk/server/auth/router.js';
import { requireBearerAuth } from '@modelcontextprotocol/sdk/server/auth/middleware/bearerAuth.js';
import { InvalidTokenError } from '@modelcontextprotocol/sdk/server/auth/errors.js';
import express from 'express';
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
  server.registerTool('ask', {
    description: 'Asks the user for their name',
    inputSchema: {},
  }, async (_args, extra) => {
    ran('ask', {});
    const requestedSchema = { type: 'object', properties: { name: { type: 'string', minLength: 1 } }, required: ['name'] };
    const answer = await extra.sendRequest(
      { method: 'elicitation/create', params: { message: 'What is your name?', requestedSchema } },
      ElicitResultSchema,
      { timeout: 600_000 },
    );
    record.elicited.push(answer);
    const text = answer.action === 'accept' ? `hello ${answer.content.name}` : `no name (${answer.action})`;
    return { content: [{ type: 'text', text }] };
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

/**
 * Starts the server; `token`, when given, is the bearer every request must carry; with
 * `oauth`, only tokens its own authorization server issued are taken.
 */
export async function startMcpServer({ token, oauth = false } = {}) {
  const record = { executions: [], cancelled: [], sessions: 0, requests: [], elicited: [], issued: [] };
  const sessions = new Map();
  async function serve(req, res, parsed) {
    if (token && req.headers.authorization !== `Bearer ${token}`) {
      res.writeHead(401, { 'content-type': 'application/json' }).end('{"error":"unauthorized"}');
      return;
    }
    let body = parsed;
    if (body === undefined) {
      let raw = '';
      for await (const part of req) raw += part;
      body = raw ? JSON.parse(raw) : undefined;
    }
    record.requests.push({ method: body?.method, session: req.headers['mcp-session-id'], at: Date.now() });
    const id = req.headers['mcp-session-id'];
    let transport = id ? sessions.get(id) : undefined;
    if (!transport && !id && req.method === 'POST' && isInitializeRequest(body)) {
      transport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        eventStore: new InMemoryEventStore(),
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
  const app = express();
  const http = createServer(app);
  await new Promise((resolve) => http.listen(0, '127.0.0.1', resolve));
  const base = `http://127.0.0.1:${http.address().port}`;
  const url = `${base}/mcp`;
  const handle = (req, res) => serve(req, res, req.body).catch((err) => {
    if (!res.headersSent) res.writeHead(500).end(String(err));
  });
  if (oauth) {
    const mcpUrl = new URL(url);
    // Tokens only for this server (RFC 8707): the code's resource must be its URL.
    const provider = new DemoInMemoryAuthProvider((resource) => resource?.href === mcpUrl.href);
    const exchange = provider.exchangeAuthorizationCode.bind(provider);
    provider.exchangeAuthorizationCode = async (...args) => {
      const tokens = await exchange(...args);
      record.issued.push(tokens.access_token);
      return tokens;
    };
    // A token it no longer knows is refused as such (401), as a real server's is.
    const verify = provider.verifyAccessToken.bind(provider);
    provider.verifyAccessToken = async (token) => {
      try {
        return await verify(token);
      } catch (err) {
        throw new InvalidTokenError(err.message);
      }
    };
    record.provider = provider;
    app.use(mcpAuthRouter({ provider, issuerUrl: new URL(base), resourceServerUrl: mcpUrl, scopesSupported: ['mcp:tools'] }));
    const bearer = requireBearerAuth({ verifier: provider, resourceMetadataUrl: getOAuthProtectedResourceMetadataUrl(mcpUrl) });
    app.all('/mcp', bearer, express.json(), handle);
  } else {
    app.all('/mcp', handle);
  }
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
