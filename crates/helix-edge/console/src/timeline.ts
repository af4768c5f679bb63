// A run's spans as a timeline (the worker's `otel` feature): one lane per span, a bar
// placed on the run's time from its start to its end — model calls, tool calls, commits,
// and the time the run waited on a person, a client or sub-agents — and the totals of
// each. Said in words too: every bar has its name and duration as text.

import type { RunSpans, SessionHandle, Span } from '@helix-edge/client';
import { HttpError } from '@helix-edge/client';
import { h } from './dom.js';

/** What a span is, for its colour and its total. */
function kindOf(span: Span): 'run' | 'slice' | 'model' | 'tool' | 'wait' | 'commit' {
  const op = span.name.split(' ')[0];
  switch (op) {
    case 'invoke_agent': return 'run';
    case 'agent_slice': return 'slice';
    case 'chat': return 'model';
    case 'execute_tool': return 'tool';
    case 'commit': return 'commit';
    default: return op.startsWith('await_') ? 'wait' : 'slice';
  }
}

/** `ms` as people read it. */
export function duration(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)} s`;
  return `${Math.floor(ms / 60_000)} min ${Math.round((ms % 60_000) / 1000)} s`;
}

/** What a span's row says beside its name. */
function detail(span: Span): string {
  const a = span.attributes as Record<string, unknown>;
  const parts: string[] = [];
  if (a['gen_ai.usage.input_tokens'] !== undefined) parts.push(`${a['gen_ai.usage.input_tokens']} in / ${a['gen_ai.usage.output_tokens']} out`);
  if (a['helix.tool.answer'] && a['helix.tool.answer'] !== 'server') parts.push(String(a['helix.tool.answer']));
  if (a['helix.tool.decided_by']) parts.push(`by ${a['helix.tool.decided_by']}`);
  if (a['helix.slice.cause']) parts.push(`${a['helix.slice.cause']} → ${a['helix.slice.outcome']}`);
  if (span.error) parts.push(`failed: ${span.error}`);
  return parts.join(' · ');
}

/** The timeline of `spans` (a run's, as the worker keeps them). */
export function timeline(runId: string, body: RunSpans): HTMLElement {
  const spans = [...body.spans].sort((a, b) => a.startMs - b.startMs || b.endMs - a.endMs);
  if (spans.length === 0) return h('p', { class: 'empty' }, `No spans of ${runId} are kept.`);
  const start = Math.min(...spans.map((s) => s.startMs));
  const end = Math.max(...spans.map((s) => s.endMs));
  const total = Math.max(end - start, 1);
  const sum = (kind: string) => spans.filter((s) => kindOf(s) === kind).reduce((n, s) => n + (s.endMs - s.startMs), 0);
  const kindTotal = (kind: string, label: string) =>
    h('span', {}, h('span', { class: `swatch span-${kind}` }), ` ${label} ${duration(sum(kind))}`);
  const totals = h('p', { class: 'totals' },
    kindTotal('model', 'model'), kindTotal('tool', 'tools'),
    kindTotal('wait', 'waiting on people and children'), kindTotal('commit', 'commits'));
  const lanes = spans.map((span) => {
    const kind = kindOf(span);
    const ms = span.endMs - span.startMs;
    const left = ((span.startMs - start) / total) * 100;
    const width = Math.max((ms / total) * 100, 0.4);
    // Placed through the CSSOM: the console's CSP allows no inline style attributes.
    const bar = h('span', { class: `bar span-${kind}` });
    bar.style.marginLeft = `${left.toFixed(2)}%`;
    bar.style.width = `${width.toFixed(2)}%`;
    return h('li', { class: `lane${span.error ? ' failed' : ''}`, 'data-kind': kind },
      h('span', { class: 'lane-name' }, span.name, h('small', {}, ` ${duration(ms)}`), ' ', h('small', {}, detail(span))),
      h('span', { class: 'track' }, bar));
  });
  const exported = body.export.endpoint
    ? `Exported over OTLP: ${body.export.sent} sent, ${body.export.unsent} waiting, ${body.export.dropped} dropped.`
    : 'No OTLP endpoint is configured: the spans are kept here only.';
  return h('figure', { class: 'timeline', 'aria-label': `Timeline of ${runId}` },
    h('figcaption', {}, h('strong', {}, runId), ` · ${duration(total)} · trace ${body.traceId ?? '–'}`),
    totals,
    h('ol', { class: 'lanes' }, ...lanes),
    h('p', { class: 'meta' }, exported));
}

/** Loads run `runId`'s spans into `into`; a worker without traces says so. */
export async function showTimeline(session: SessionHandle, runId: string, into: HTMLElement): Promise<void> {
  into.hidden = false;
  into.replaceChildren(h('p', { class: 'empty' }, 'Loading the spans…'));
  try {
    into.replaceChildren(timeline(runId, await session.spans(runId)));
  } catch (e) {
    if (e instanceof HttpError && e.code === 'not_found') {
      into.replaceChildren(h('p', { class: 'empty' }, "This worker keeps no traces (helix-edge's otel feature)."));
      return;
    }
    throw e;
  }
}
