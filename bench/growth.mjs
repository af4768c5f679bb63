// The growth benchmark (`BENCH_MODE=growth bench/e2e.mjs`): one session driven for
// `BENCH_TURNS` (default 500) consecutive human-in-the-loop turns — a follow-up message,
// the model's call of an approval-gated tool, the approval, the model's answer — with
// the worker's CPU per turn taken from /proc over the first and the last ten turns. The
// runtime's own cost should stay flat as the session grows; what the model request must
// carry (the whole transcript) grows with it, and is reported with it: the bytes of the
// last model request of each window (the mock model sees them).

import { cpuByRole } from './cpu.mjs';
import { API_TOKEN, api } from '../tests/e2e/client.mjs';
import { openStream } from '../tests/e2e/sse.mjs';

const WINDOW = 10;

/** One turn of session `id` whose stream has seen events up to `after`: its last id. */
export async function turn(worker, id, after, first) {
  const url = `${worker.baseUrl}/v1/sessions/${id}/stream`;
  const headers = { authorization: `Bearer ${API_TOKEN}` };
  const started = first
    ? await api(worker, 'POST', '/v1/sessions', { agent: 'assistant', sessionId: id, input: 'delete /tmp/bench' })
    : await api(worker, 'POST', `/v1/sessions/${id}/messages`, { message: 'delete /tmp/bench' });
  if (started.status !== (first ? 201 : 202)) throw new Error(`turn: ${started.status} ${JSON.stringify(started.body)}`);
  const sse = await openStream(url, { headers, lastEventId: after });
  try {
    const events = await sse.until((e) => e.type === 'tool_approval_request');
    const request = events.find((e) => e.type === 'tool_approval_request');
    const approved = await api(worker, 'POST', `/v1/sessions/${id}/tool-results`, {
      kind: 'approval-response', toolCallId: request.json.toolCallId, approved: true,
    });
    if (approved.status !== 202) throw new Error(`approve: ${approved.status}`);
    const all = await sse.until((e) => e.type === 'end');
    return all.at(-1).id;
  } finally {
    sse.close();
  }
}

/**
 * Drives one session for `turns` turns; returns the worker's CPU ms per turn (and of the
 * other processes) over the first and the last `WINDOW` turns, with the size of the
 * model's last request in each (`llm`: the mock model, whose record of requests is
 * emptied after each turn).
 */
export async function growth(worker, llm, turns) {
  const id = `growth-${Date.now().toString(36)}`;
  const windows = [];
  let after = 0;
  let t0;
  let cpu0;
  for (let i = 0; i < turns; i++) {
    const measured = i < WINDOW || i >= turns - WINDOW;
    if (measured && (i === 0 || i === turns - WINDOW)) {
      cpu0 = cpuByRole(worker.pid);
      t0 = performance.now();
    }
    after = await turn(worker, id, after, i === 0);
    const requestBytes = Buffer.byteLength(llm.requests.at(-1)?.raw ?? '');
    llm.requests.length = 0;
    if (i === WINDOW - 1 || i === turns - 1) {
      const cpu1 = cpuByRole(worker.pid);
      const per = (role) => Math.round(((cpu1[role] - (cpu0[role] ?? 0)) / WINDOW) * 100) / 100;
      windows.push({
        turns: `${i + 2 - WINDOW}–${i + 1}`,
        workerCpuMs: per('worker workerd'),
        allCpuMs: Math.round(Object.keys(cpu1).reduce((a, r) => a + per(r), 0) * 100) / 100,
        wallMs: Math.round(((performance.now() - t0) / WINDOW) * 100) / 100,
        modelRequestBytes: requestBytes,
      });
    }
  }
  const [first, last] = windows;
  return {
    turns,
    windows,
    workerRatio: Math.round((last.workerCpuMs / first.workerCpuMs) * 100) / 100,
  };
}
