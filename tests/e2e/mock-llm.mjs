// An OpenAI-compatible Chat Completions server on loopback, for the end-to-end suite
// (and Anthropic's Messages format for requests to `…/messages`).
// Tests queue the model's answers (reasoning, text, tool calls, a refusal, a finish
// reason, faults); every request is recorded. With an empty queue it answers "ok".

import { createServer } from 'node:http';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

let nextId = 1;

/** The stream chunks of one scripted answer. */
function chunks(answer) {
  const base = { id: 'chatcmpl-mock', object: 'chat.completion.chunk', created: 0, model: answer.model ?? 'mock' };
  const out = [{ ...base, choices: [{ index: 0, delta: { role: 'assistant', content: '' } }] }];
  if (answer.reasoning) {
    out.push({ ...base, choices: [{ index: 0, delta: { reasoning_content: answer.reasoning } }] });
  }
  const text = answer.text ?? '';
  const size = answer.chunkSize ?? 8;
  for (let i = 0; i < text.length; i += size) {
    out.push({ ...base, choices: [{ index: 0, delta: { content: text.slice(i, i + size) } }] });
  }
  (answer.calls ?? []).forEach((call, index) => {
    const id = call.id ?? `call_mock_${nextId++}`;
    const args = call.rawArgs ?? JSON.stringify(call.args ?? {});
    const half = Math.floor(args.length / 2);
    out.push({ ...base, choices: [{ index: 0, delta: { tool_calls: [
      { index, id, type: 'function', function: { name: call.name, arguments: args.slice(0, half) } },
    ] } }] });
    out.push({ ...base, choices: [{ index: 0, delta: { tool_calls: [
      { index, function: { arguments: args.slice(half) } },
    ] } }] });
  });
  if (answer.refusal) {
    out.push({ ...base, choices: [{ index: 0, delta: { refusal: answer.refusal } }] });
  }
  const finish = answer.finish ?? ((answer.calls ?? []).length ? 'tool_calls' : 'stop');
  out.push({ ...base, choices: [{ index: 0, delta: {}, finish_reason: finish }] });
  const [input, output] = answer.usage ?? [11, 7];
  out.push({ ...base, choices: [], usage: { prompt_tokens: input, completion_tokens: output, total_tokens: input + output } });
  return out;
}

/** The same answer as Anthropic Messages stream events (a request to `…/messages`):
 *  `thinking: {text, signature}` and `redacted` (data) open the turn, as the API sends
 *  them with extended thinking on. */
function anthropicEvents(answer) {
  const out = [{ type: 'message_start', message: { id: `msg_mock_${nextId++}`, type: 'message', role: 'assistant',
    model: 'mock', content: [], stop_reason: null, usage: { input_tokens: 11, output_tokens: 1 } } }];
  let index = 0;
  const block = (start, ...deltas) => {
    out.push({ type: 'content_block_start', index, content_block: start });
    for (const delta of deltas) out.push({ type: 'content_block_delta', index, delta });
    out.push({ type: 'content_block_stop', index });
    index += 1;
  };
  if (answer.thinking) {
    const { text, signature } = answer.thinking;
    const half = Math.floor(text.length / 2);
    block({ type: 'thinking', thinking: '', signature: '' },
      { type: 'thinking_delta', thinking: text.slice(0, half) },
      { type: 'thinking_delta', thinking: text.slice(half) },
      { type: 'signature_delta', signature });
  }
  if (answer.redacted) block({ type: 'redacted_thinking', data: answer.redacted });
  if (answer.text) block({ type: 'text', text: '' }, { type: 'text_delta', text: answer.text });
  for (const call of answer.calls ?? []) {
    const args = JSON.stringify(call.args ?? {});
    block({ type: 'tool_use', id: call.id ?? `toolu_mock_${nextId++}`, name: call.name, input: {} },
      { type: 'input_json_delta', partial_json: args.slice(0, 5) },
      { type: 'input_json_delta', partial_json: args.slice(5) });
  }
  const stop = (answer.calls ?? []).length ? 'tool_use' : 'end_turn';
  out.push({ type: 'message_delta', delta: { stop_reason: stop, stop_sequence: null }, usage: { output_tokens: 7 } });
  out.push({ type: 'message_stop' });
  return out;
}

export async function startMockLlm() {
  const queue = [];
  const requests = [];
  const ledger = [];
  const orders = [];
  const hung = new Set();
  let responder = null;
  let ledgerDelayMs = 0;
  async function serve(req, res) {
    let body = '';
    for await (const part of req) body += part;
    let parsed = null;
    try { parsed = JSON.parse(body); } catch { /* recorded as null */ }
    if (req.url.endsWith('/ledger')) {
      // The test agent's tool reports each execution here, outside the worker.
      ledger.push({ ...parsed, at: Date.now() });
      if (ledgerDelayMs) await sleep(ledgerDelayMs);
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"ok":true}');
      return;
    }
    const order = req.url.match(/^\/api\/orders\/([^/]+)\/cancel$/);
    if (order) {
      // The example worker's `cancel_order` tool calls "the shop's API" here.
      orders.push({ id: order[1], authorization: req.headers.authorization, at: Date.now() });
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ cancelled: order[1] }));
      return;
    }
    requests.push({ path: req.url, headers: req.headers, body: parsed, raw: body, at: Date.now() });
    const answer = queue.shift() ?? responder?.(parsed) ?? { text: 'ok' };
    if (answer.delayMs) await sleep(answer.delayMs);
    if (answer.status) {
      res.writeHead(answer.status, { 'content-type': 'application/json', ...(answer.headers ?? {}) });
      res.end(JSON.stringify(answer.body ?? { error: { message: `mock ${answer.status}` } }));
      return;
    }
    if (answer.hang) {
      hung.add(res);
      return;
    }
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    if (req.url.endsWith('/messages')) {
      for (const event of anthropicEvents(answer)) res.write(`event: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`);
      res.end();
      return;
    }
    const all = chunks(answer);
    const upTo = answer.cutAfter ?? answer.stallAfter ?? all.length;
    for (const chunk of all.slice(0, upTo)) {
      res.write(`data: ${JSON.stringify(chunk)}\n\n`);
      if (answer.chunkDelayMs) await sleep(answer.chunkDelayMs);
    }
    if (answer.stallAfter !== undefined) {
      // Streams that much, then neither sends more nor ends.
      hung.add(res);
      return;
    }
    if (answer.cutAfter !== undefined) {
      res.destroy();
      return;
    }
    if (answer.malformed) res.write('data: {"choices": [\n\n');
    res.end('data: [DONE]\n\n');
  }
  const server = createServer((req, res) => {
    serve(req, res).catch((err) => {
      // The worker went away mid-request (the crash tests kill it): nobody to answer.
      if (req.destroyed || res.destroyed) return;
      throw err;
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address();
  return {
    url: `http://127.0.0.1:${port}/v1`,
    ledgerUrl: `http://127.0.0.1:${port}/ledger`,
    apiUrl: `http://127.0.0.1:${port}/api`,
    requests,
    /** Orders the example worker's `cancel_order` cancelled: { id, authorization, at }. */
    orders,
    /** Executions the `ledger` agent's `record` tool reported: { session, toolCallId, label, at }. */
    ledger,
    /** Holds each ledger report this long before answering (the tool is "running"). */
    setLedgerDelay(ms) { ledgerDelayMs = ms; },
    /** Queues answers, served in order. */
    push(...answers) { queue.push(...answers); },
    pending() { return queue.length; },
    /** Answers every request the queue does not: `fn(requestBody)` returns an answer. */
    respondWith(fn) { responder = fn; },
    /** Drops answers a previous test queued but never consumed, and the requests seen. */
    reset() { queue.length = 0; requests.length = 0; },
    async close() {
      for (const res of hung) res.destroy();
      await new Promise((resolve) => server.close(resolve));
      server.closeAllConnections?.();
    },
  };
}
