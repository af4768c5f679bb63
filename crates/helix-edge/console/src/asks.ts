// Cards for calls that ask the user mid-call (an MCP server's): "Connect" for an
// `authorization` (the worker's start link, with this tab's credential, opens the
// server's sign-in in a new tab, bound to this browser; the worker's callback
// answers the call, and the card goes away as the session moves on) and a form for an
// `elicitation` (its fields from the requested schema: strings, numbers, yes/no and
// choices, as MCP allows). The session's pane and the Inbox show the same cards.

import type { SessionHandle } from '@helix-edge/client';
import { h } from './dom.js';

/** What such a call shows (a pending call, or an inbox item). */
export interface Asking {
  toolCallId: string;
  toolName: string;
  kind: string;
  server?: string;
  authorizeUrl?: string;
  message?: string;
  requestedSchema?: Record<string, unknown>;
}

/** Whether the call is one of these. */
export function asks(call: { kind: string }): boolean {
  return call.kind === 'authorization' || call.kind === 'elicitation';
}

/** The card for `call`, answered through `session` (then `done`). */
export function askCard(
  call: Asking,
  id: string,
  session: () => SessionHandle,
  attempt: (action: () => Promise<unknown>) => Promise<void>,
  done: () => Promise<void> = async () => {},
): HTMLElement {
  const server = call.server ?? 'the server';
  if (call.kind === 'authorization') {
    const decline = () => attempt(async () => {
      await session().declineAuthorization(call.toolCallId);
      await done();
    });
    // The start link takes this tab's credential (a new tab cannot send a header), and
    // binds the sign-in to this browser.
    const connect = h('a', { class: 'button primary', href: call.authorizeUrl ?? '#', target: '_blank', rel: 'noopener noreferrer' }, `Connect ${server}`);
    if (call.authorizeUrl) {
      void session().authorizeLink(call.authorizeUrl).then((link) => { connect.setAttribute('href', link); }, () => {});
    }
    return h(
      'section',
      { class: 'card asks', id, 'aria-label': `Connect ${server}` },
      h('h3', {}, `Connect ${server}`),
      h('p', {}, `${call.toolName} needs access to ${server}. Sign in there to allow it; this session goes on once you are back.`),
      h('p', {},
        connect,
        ' ',
        h('button', { type: 'button', onclick: decline }, 'Not now')),
    );
  }
  const fields = formFields(call.requestedSchema ?? {}, id);
  const send = (answer: Parameters<SessionHandle['answerElicitation']>[1]) => attempt(async () => {
    await session().answerElicitation(call.toolCallId, answer);
    await done();
  });
  return h(
    'section',
    { class: 'card asks', id, 'aria-label': `${server} asks` },
    h('h3', {}, `${server} asks`),
    h('p', {}, call.message ?? ''),
    h('form', {
      onsubmit: (ev: Event) => {
        ev.preventDefault();
        const given = fields.map((f) => [f.name, f.value()] as const).filter(([, v]) => v !== undefined);
        void send({ action: 'accept', content: Object.fromEntries(given) });
      },
    },
      ...fields.map((f) => f.element),
      h('button', { type: 'submit', class: 'primary' }, 'Send'),
      h('button', { type: 'button', onclick: () => send({ action: 'decline' }) }, 'Decline'),
      h('button', { type: 'button', onclick: () => send({ action: 'cancel' }) }, 'Dismiss')),
  );
}

interface Field {
  name: string;
  element: HTMLElement;
  value: () => unknown;
}

/** An input per property of a flat object schema. */
function formFields(schema: Record<string, unknown>, id: string): Field[] {
  const properties = (schema.properties ?? {}) as Record<string, Record<string, unknown>>;
  const required = new Set((schema.required ?? []) as string[]);
  return Object.entries(properties).map(([name, prop]) => {
    const inputId = `${id}-${name}`.replace(/[^A-Za-z0-9_-]/g, '_');
    const label = h('label', { for: inputId }, String(prop.title ?? name), required.has(name) ? '' : ' (optional)');
    const hint = typeof prop.description === 'string' ? h('small', {}, prop.description) : '';
    const options = (prop.enum ?? (prop.oneOf as { const: unknown }[] | undefined)?.map((o) => o.const)) as unknown[] | undefined;
    if (options) {
      const select = h('select', { id: inputId, required: required.has(name) },
        ...options.map((o) => h('option', { value: String(o) }, String(o)))) as HTMLSelectElement;
      return { name, element: h('div', {}, label, select, hint), value: () => select.value };
    }
    if (prop.type === 'boolean') {
      const box = h('input', { id: inputId, type: 'checkbox' }) as HTMLInputElement;
      return { name, element: h('div', {}, box, label, hint), value: () => box.checked };
    }
    const numeric = prop.type === 'number' || prop.type === 'integer';
    const input = h('input', {
      id: inputId, autocomplete: 'off', required: required.has(name),
      type: numeric ? 'number' : prop.format === 'email' ? 'email' : 'text',
      step: prop.type === 'integer' ? '1' : numeric ? 'any' : undefined,
    }) as HTMLInputElement;
    const value = () => {
      if (input.value === '' && !required.has(name)) return undefined; // left out
      return numeric ? Number(input.value) : input.value;
    };
    return { name, element: h('div', {}, label, input, hint), value };
  });
}
