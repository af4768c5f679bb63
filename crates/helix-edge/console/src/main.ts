// The browser console, a workspace: the caller's sessions (`sessions.ts`), the open
// session's conversation — chat, approve or deny, answer client tools — and an inspector
// of its state, runs (each run's spans as a timeline, `timeline.ts`) and checkpoints
// (and, where the worker has schedules, its
// schedules and the messages waiting their turn); and the Inbox (`inbox.ts`), the calls
// waiting on the caller across sessions. On @helix-edge/client, with the DOM and
// nothing else. Served by the worker's `console` feature at `/`.

import {
  HelixClient,
  HttpError,
  type ConnectionState,
  type EventStream,
  type PendingCall,
  type QueuedMessage,
  type Schedule,
  type SessionEvent,
  type SessionHandle,
  type StateMirror,
  type WhenBusy,
} from '@helix-edge/client';
import { createPatch } from 'rfc6902';
import { h, jsonTree, text } from './dom.js';
import { askCard, asks } from './asks.js';
import { InboxView, approversNote } from './inbox.js';
import { SessionList } from './sessions.js';
import { showTimeline } from './timeline.js';
import { completeSignIn, provider, signIn } from './signin.js';

const TOKEN = 'helix-edge.token';
const SESSION_TOKENS = 'helix-edge.session-tokens';

const byId = <T extends HTMLElement = HTMLElement>(id: string) => document.getElementById(id) as T;
const ui = {
  connection: byId('connection'),
  auth: byId<HTMLDetailsElement>('auth'),
  token: byId<HTMLInputElement>('token'),
  agent: byId<HTMLSelectElement>('agent'),
  firstMessage: byId<HTMLTextAreaElement>('first-message'),
  sessionId: byId<HTMLInputElement>('session-id'),
  notice: byId('notice'),
  chat: byId('chat'),
  inspect: byId('inspect'),
  sessionLabel: byId('session-label'),
  status: byId('status'),
  transcript: byId<HTMLOListElement>('transcript'),
  pending: byId('pending'),
  message: byId<HTMLInputElement>('message'),
  state: byId('state'),
  runs: byId<HTMLOListElement>('runs'),
  timeline: byId('timeline'),
  checkpoints: byId<HTMLOListElement>('checkpoints'),
  checkpoint: byId('checkpoint'),
  whenBusy: byId<HTMLSelectElement>('when-busy'),
  schedulesSection: byId('schedules-section'),
  schedules: byId<HTMLOListElement>('schedules'),
  queue: byId<HTMLOListElement>('queue'),
  scheduleEvery: byId<HTMLInputElement>('schedule-every'),
  scheduleMessage: byId<HTMLInputElement>('schedule-message'),
  workspace: byId('workspace'),
  noSession: byId('no-session'),
  navSessions: byId<HTMLButtonElement>('nav-sessions'),
  navInbox: byId<HTMLButtonElement>('nav-inbox'),
};

const client = new HelixClient({
  baseUrl: location.origin,
  token: () => sessionStorage.getItem(TOKEN) ?? undefined,
});
let session: SessionHandle | undefined;
let mirror: StateMirror | undefined;
/** The streaming entries of the current step, replaced by the transcript when it commits. */
let liveText: HTMLElement | undefined;
const toolCards = new Map<string, HTMLElement>();
/** Refreshes can overlap (a commit, then the run's end): only the newest one is shown. */
let refreshes = 0;

const sessionList = new SessionList(
  byId('session-list'),
  byId<HTMLSelectElement>('list-agent'),
  byId<HTMLSelectElement>('list-status'),
  client,
  (id) => void attempt(() => open(id)),
);
const inbox = new InboxView(byId('inbox'), byId('inbox-list'), byId('inbox-count'), {
  client,
  attempt,
  open: (id) => {
    showView('sessions');
    void attempt(() => open(id));
  },
});

/** Shows the Sessions workspace or the Inbox. */
function showView(view: 'sessions' | 'inbox'): void {
  ui.workspace.hidden = view !== 'sessions';
  ui.navSessions.setAttribute('aria-pressed', String(view === 'sessions'));
  ui.navInbox.setAttribute('aria-pressed', String(view === 'inbox'));
  if (view === 'inbox') inbox.show();
  else inbox.hide();
}

function sessionTokens(): Record<string, string> {
  try {
    return JSON.parse(sessionStorage.getItem(SESSION_TOKENS) ?? '{}');
  } catch {
    return {};
  }
}

function notice(message: string): void {
  ui.notice.textContent = message;
}

/** Runs an action, showing its error instead of throwing. */
async function attempt(action: () => Promise<unknown>): Promise<void> {
  notice('');
  try {
    await action();
  } catch (e) {
    if (e instanceof HttpError && (e.status === 401 || e.status === 503)) ui.auth.open = true;
    notice(e instanceof HttpError ? `${e.message} (${e.code})` : String(e));
  }
}

/** A token from a link (`?token=` or `#token=`) is kept in this tab and taken out of the URL. */
function takeLinkToken(): void {
  const url = new URL(location.href);
  const hash = new URLSearchParams(url.hash.slice(1));
  const token = url.searchParams.get('token') ?? hash.get('token');
  if (!token) return;
  sessionStorage.setItem(TOKEN, token);
  url.searchParams.delete('token');
  hash.delete('token');
  url.hash = hash.toString();
  history.replaceState(null, '', url);
}

async function loadAgents(): Promise<void> {
  const agents = await client.agents();
  ui.agent.replaceChildren(...agents.map((a) => h('option', { value: a.name }, `${a.name} — ${a.description}`)));
  sessionList.agents(agents.map((a) => a.name));
  void sessionList.refresh();
  await inbox.poll();
  ui.navInbox.hidden = !inbox.served;
}

/** Shows session `handle`; `opening`: its stream, when a request already answered with it. */
async function attach(handle: SessionHandle, opening?: EventStream): Promise<void> {
  mirror?.close();
  session = handle;
  const url = new URL(location.href);
  url.searchParams.set('session', handle.id);
  history.replaceState(null, '', url);
  ui.sessionLabel.textContent = handle.id;
  ui.chat.hidden = false;
  ui.inspect.hidden = false;
  ui.noSession.hidden = true;
  sessionList.select(handle.id);
  await refresh();
  mirror = await handle.mirror({ onConnection: showConnection }, opening);
  mirror.subscribe((m, event) => {
    render(m);
    if (event) onEvent(event);
  });
  render(mirror);
  ui.message.focus();
}

function showConnection(c: ConnectionState): void {
  const words: Record<string, string> = {
    connecting: 'Connecting…',
    open: 'Live',
    reconnecting: `Reconnecting (attempt ${c.attempt}${c.delayMs ? `, in ${Math.ceil(c.delayMs / 1000)} s` : ''})…`,
    closed: 'Idle: the run has ended',
  };
  ui.connection.textContent = words[c.status] ?? c.status;
  ui.connection.dataset.status = c.status;
}

/** The committed transcript, runs and checkpoints, fetched again. */
async function refresh(): Promise<void> {
  if (!session) return;
  const s = session;
  const mine = ++refreshes;
  const entries: HTMLElement[] = [];
  for await (const m of s.messages({ limit: 200 })) entries.push(...messageEntries(m as Message));
  const [runs, checkpoints, scheduled] = await Promise.all([s.runs(), s.checkpoints(), schedulesOf(s)]);
  if (s !== session || mine !== refreshes) return;
  renderSchedules(scheduled);
  ui.transcript.replaceChildren(...entries);
  liveText = undefined;
  toolCards.clear();
  ui.runs.replaceChildren(
    ...runs.map((r) => h('li', {},
      `${r.runId} · turn ${r.turn} · ${r.status} · ${r.stepCount} step${r.stepCount === 1 ? '' : 's'} `,
      h('button', { type: 'button', class: 'link', onclick: () => attempt(() => showTimeline(s, r.runId, ui.timeline)) }, 'Timeline'))),
  );
  ui.checkpoints.replaceChildren(
    ...checkpoints.map((c) => {
      const label = `step ${c.stepCount} · ${c.status} · ${new Date(c.timestamp).toLocaleTimeString()}`;
      return h('li', {}, h('button', { type: 'button', class: 'link', onclick: () => attempt(() => openCheckpoint(c.id)) }, label));
    }),
  );
}

/** The session's schedules and queue; `undefined` when the worker has no schedules. */
async function schedulesOf(s: SessionHandle): Promise<{ schedules: Schedule[]; queue: QueuedMessage[] } | undefined> {
  try {
    return await s.schedules();
  } catch (e) {
    if (e instanceof HttpError && e.code === 'not_found') return undefined;
    throw e;
  }
}

function renderSchedules(scheduled: { schedules: Schedule[]; queue: QueuedMessage[] } | undefined): void {
  ui.schedulesSection.hidden = !scheduled;
  if (!scheduled) return;
  const when = (s: Schedule) =>
    s.at ? `at ${new Date(s.at).toLocaleString()}` : s.every ? `every ${s.every} s` : `${s.cron} (${s.timezone})`;
  const said = (messages: object[]) =>
    messages
      .map((m) => ('content' in m && typeof m.content === 'string' ? m.content : JSON.stringify(m)))
      .join(' / ');
  ui.schedules.replaceChildren(
    ...scheduled.schedules.map((s) =>
      h('li', { id: `schedule-${s.scheduleId}` },
        `${when(s)} · next ${new Date(s.nextFireAt).toLocaleTimeString()} · fired ${s.fired}: ${said(s.messages)} `,
        h('button', { type: 'button', onclick: () => attempt(() => cancelSchedule(s.scheduleId)) }, 'Cancel')),
    ),
  );
  ui.queue.replaceChildren(
    ...scheduled.queue.map((q) =>
      h('li', { class: 'queued' }, `${said(q.messages)}${q.merged ? ` (${q.merged} merged)` : ''} · run ${q.runId}`),
    ),
  );
}

/** The schedules and queue alone, fetched again (the transcript keeps its live notes). */
async function refreshSchedules(): Promise<void> {
  const s = session;
  if (!s) return;
  const scheduled = await schedulesOf(s);
  if (s === session) renderSchedules(scheduled);
}

async function cancelSchedule(id: string): Promise<void> {
  await session!.unschedule(id);
  await refreshSchedules();
}

/** Messages of the transcript at a checkpoint shown at a time. */
const CHECKPOINT_PAGE = 50;

/**
 * The session as it was at checkpoint `id`: its state there beside today's, what changed
 * between, and the transcript the agent had seen by then (a page at a time).
 */
async function openCheckpoint(id: string): Promise<void> {
  const s = session;
  if (!s || !mirror) return;
  const at = await s.checkpoint(id, 0, CHECKPOINT_PAGE);
  const changes = createPatch(at.state, mirror.state);
  const seen = h('ol', { class: 'transcript', 'aria-label': 'Transcript then' }, ...at.messages.flatMap((m) => messageEntries(m as Message)));
  let shown = at.messages.length;
  const more = h('button', { type: 'button', class: 'link' }, 'Show more') as HTMLButtonElement;
  more.hidden = shown >= at.total;
  more.onclick = () =>
    attempt(async () => {
      more.disabled = true; // one page at a time
      try {
        const page = await s.checkpoint(id, shown, CHECKPOINT_PAGE);
        if (s !== session) return; // another session was opened meanwhile
        seen.append(...page.messages.flatMap((m) => messageEntries(m as Message)));
        shown += page.messages.length;
        more.hidden = shown >= page.total || page.messages.length === 0;
      } finally {
        more.disabled = false;
      }
    });
  ui.checkpoint.replaceChildren(
    h('h3', {}, `At step ${at.checkpoint.stepCount} (${at.total} message${at.total === 1 ? '' : 's'})`),
    h('div', { class: 'side-by-side' },
      h('section', { 'aria-label': 'State then' }, h('h4', {}, 'Then'), jsonTree(at.state)),
      h('section', { 'aria-label': 'State now' }, h('h4', {}, 'Now'), jsonTree(mirror.state))),
    h('h4', {}, changes.length === 0 ? 'No change since' : 'Changed since'),
    h('ul', { class: 'changes' }, ...changes.map((c) => h('li', {}, `${c.op} ${c.path}${'value' in c ? ` ${JSON.stringify(c.value)}` : ''}`))),
    h('h4', {}, 'What the agent had seen'),
    seen,
    more,
  );
  ui.checkpoint.hidden = false;
}

interface Message {
  role: string;
  content?: unknown;
  toolCalls?: { id: string; name: string; arguments: unknown }[];
  toolName?: string;
  isError?: boolean;
}

function messageEntries(m: Message): HTMLElement[] {
  const body = typeof m.content === 'string' ? m.content : m.content === undefined ? '' : JSON.stringify(m.content);
  switch (m.role) {
    case 'user':
      return [h('li', { class: 'user' }, h('span', { class: 'role' }, 'You'), body)];
    case 'assistant':
      return [
        h(
          'li',
          { class: 'assistant' },
          h('span', { class: 'role' }, 'Agent'),
          body,
          ...(m.toolCalls ?? []).map((c) => h('div', { class: 'tool' }, `Calls ${c.name} `, h('pre', {}, JSON.stringify(c.arguments)))),
        ),
      ];
    case 'tool':
      return [
        h('li', { class: 'tool-result' }, h('span', { class: 'role' }, `${m.toolName} ${m.isError ? 'failed' : 'returned'}`), h('pre', {}, body)),
      ];
    default:
      return [];
  }
}

function onEvent(e: SessionEvent): void {
  const child = 'sessionId' in e && session && e.sessionId !== session.id ? ` (sub-agent ${e.sessionId})` : '';
  switch (e.type) {
    case 'text_delta':
      if (child) return;
      if (!liveText) {
        liveText = h('li', { class: 'assistant live' }, h('span', { class: 'role' }, 'Agent (streaming)'));
        ui.transcript.append(liveText);
      }
      liveText.append(e.delta);
      return;
    case 'tool_start':
    case 'tool_approval_request': {
      const card = toolCards.get(e.toolCallId) ?? h('li', { class: 'tool' });
      const doing = e.type === 'tool_approval_request' ? 'needs your approval' : e.executor === 'client' ? 'waits for your answer' : 'running…';
      card.replaceChildren(text(`Tool ${e.toolName}${child}: ${doing}`), h('pre', {}, JSON.stringify(e.arguments)));
      toolCards.set(e.toolCallId, card);
      ui.transcript.append(card);
      return;
    }
    case 'tool_end': {
      const card = toolCards.get(e.toolCallId);
      const by = e.decidedBy ? ` (decided by ${e.decidedBy.subject})` : '';
      const outcome = e.success ? `done${by}: ${JSON.stringify(e.result)}` : `failed${by}: ${e.error ?? ''}`;
      if (card) card.firstChild!.textContent = `Tool ${e.toolName}${child}: ${outcome}`;
      return;
    }
    case 'subagent_start':
      ui.transcript.append(h('li', { class: 'tool' }, `Sub-agent ${e.agentType} started (${e.subSessionId})`));
      return;
    case 'error':
      ui.transcript.append(h('li', { class: 'error' }, `Error${child}: ${e.message} (${e.code})`));
      return;
    case 'message_queued':
      ui.transcript.append(h('li', { class: 'tool' }, `Message queued (${e.policy}, place ${e.position})${e.scheduleId ? ` by ${e.scheduleId}` : ''}`));
      void attempt(refreshSchedules);
      return;
    case 'message_merged':
      ui.transcript.append(h('li', { class: 'tool' }, `Message merged into the queued one (${e.merged} merged)`));
      void attempt(refreshSchedules);
      return;
    case 'custom':
      ui.transcript.append(h('li', { class: 'tool' }, `Event ${e.eventName}${child}: `, h('pre', {}, JSON.stringify(e.data))));
      return;
    case 'step_committed':
    case 'run_suspended':
    case 'run_interrupted':
    case 'end':
    case 'fail':
      if (!child) void attempt(refresh);
      return;
    default:
      return;
  }
}

function render(m: StateMirror): void {
  if (m.error) notice(m.error instanceof HttpError ? `${m.error.message} (${m.error.code})` : String(m.error));
  ui.state.replaceChildren(jsonTree(m.state));
  const waiting = m.pendingToolCalls.length;
  const error = m.session.error ? ` — ${m.session.error.message}` : '';
  ui.status.textContent = `Status: ${m.status}${waiting ? ` — waiting for you (${waiting} call${waiting === 1 ? '' : 's'})` : ''}${error}`;
  renderPending(m.pendingToolCalls);
}

/** One card per pending call; cards already shown keep what the user typed. */
function renderPending(calls: PendingCall[]): void {
  const keep = new Set(calls.map((c) => `pending-${c.toolCallId}`));
  for (const card of [...ui.pending.children]) if (!keep.has(card.id)) card.remove();
  for (const call of calls) {
    if (document.getElementById(`pending-${call.toolCallId}`)) continue;
    const id = `pending-${call.toolCallId}`;
    const card = asks(call)
      ? askCard(call, id, () => session!, attempt)
      : call.kind === 'approval' ? approvalCard(call) : clientToolCard(call);
    ui.pending.append(card);
  }
}

function approvalCard(call: PendingCall): HTMLElement {
  const reasonId = `reason-${call.toolCallId}`;
  const reason = h('input', { id: reasonId, autocomplete: 'off' }) as HTMLInputElement;
  const answer = (approved: boolean) => () =>
    attempt(async () => {
      const why = reason.value.trim() || undefined;
      await (approved ? session!.approve(call.toolCallId, why) : session!.deny(call.toolCallId, why));
    });
  return h(
    'section',
    { class: 'card', id: `pending-${call.toolCallId}`, 'aria-label': `Approval for ${call.toolName}` },
    h('h3', {}, `Approve ${call.toolName}?`),
    call.approvers ? approversNote(call.approvers) : text(''),
    h('pre', {}, JSON.stringify(call.arguments, null, 2)),
    h('form', { onsubmit: (ev: Event) => { ev.preventDefault(); void answer(true)(); } },
      h('label', { for: reasonId }, 'Reason (optional)'),
      reason,
      h('button', { type: 'submit', class: 'primary' }, 'Approve'),
      h('button', { type: 'button', onclick: answer(false) }, 'Deny'),
    ),
  );
}

function clientToolCard(call: PendingCall): HTMLElement {
  const args = call.arguments as { question?: unknown };
  const question = typeof args?.question === 'string' ? args.question : JSON.stringify(call.arguments);
  const inputId = `answer-${call.toolCallId}`;
  const input = h('input', { id: inputId, autocomplete: 'off', required: true }) as HTMLInputElement;
  const due = call.deadline ? ` (answer by ${new Date(call.deadline).toLocaleTimeString()})` : '';
  return h(
    'section',
    { class: 'card', id: `pending-${call.toolCallId}`, 'aria-label': `Answer for ${call.toolName}` },
    h('h3', {}, `${call.toolName} asks${due}`),
    h('p', {}, question),
    h('form', {
      onsubmit: (ev: Event) => {
        ev.preventDefault();
        void attempt(() => session!.submitResult(call.toolCallId, input.value));
      },
    },
      h('label', { for: inputId }, 'Your answer'),
      input,
      h('button', { type: 'submit' }, 'Send answer'),
      h('button', {
        type: 'button',
        onclick: () => attempt(() => session!.submitError(call.toolCallId, 'The user declined to answer.')),
      }, 'Decline'),
    ),
  );
}

function on(id: string, event: string, handler: (ev: Event) => void): void {
  byId(id).addEventListener(event, handler);
}

on('token-form', 'submit', (ev) => {
  ev.preventDefault();
  const token = ui.token.value.trim();
  if (token) sessionStorage.setItem(TOKEN, token);
  ui.token.value = '';
  ui.auth.open = false;
  void attempt(loadAgents);
});
on('token-clear', 'click', () => {
  sessionStorage.removeItem(TOKEN);
  notice('Token forgotten.');
});
on('new-session', 'submit', (ev) => {
  ev.preventDefault();
  void attempt(async () => {
    // The create answers with the run's stream (one request fewer).
    const { session: created, events } = await client.start({ agent: ui.agent.value, input: ui.firstMessage.value });
    if (created.token) {
      sessionStorage.setItem(SESSION_TOKENS, JSON.stringify({ ...sessionTokens(), [created.id]: created.token }));
    }
    ui.firstMessage.value = '';
    await attach(created, events);
    void sessionList.refresh();
  });
});
on('open-session', 'submit', (ev) => {
  ev.preventDefault();
  void attempt(() => open(ui.sessionId.value.trim()));
});
on('follow-up', 'submit', (ev) => {
  ev.preventDefault();
  const message = ui.message.value;
  void attempt(async () => {
    const whenBusy = (ui.whenBusy.value || undefined) as WhenBusy | undefined;
    if (!session) return;
    // The follow-up answers with its run's stream, which the mirror follows (while a run
    // waits, the mirror's open stream carries the continuation: answers need no stream).
    const sent = await session.sendStreaming(message, { whenBusy });
    if (mirror) mirror.follow(sent.events);
    else sent.events.close();
    ui.message.value = '';
    // A queued message shows in the queue (and its note in the transcript) until it runs.
    await (sent.queued ? refreshSchedules() : refresh());
  });
});
on('new-schedule', 'submit', (ev) => {
  ev.preventDefault();
  void attempt(async () => {
    await session!.schedule({ every: Number(ui.scheduleEvery.value), message: ui.scheduleMessage.value });
    ui.scheduleEvery.value = '';
    ui.scheduleMessage.value = '';
    await refreshSchedules();
  });
});
on('nav-sessions', 'click', () => showView('sessions'));
on('nav-inbox', 'click', () => showView('inbox'));
on('interrupt', 'click', () => void attempt(() => session!.interrupt('from the console')));
on('resume', 'click', () => void attempt(() => session!.resume()));
on('abort', 'click', () => void attempt(() => session!.abort('from the console')));

async function open(id: string): Promise<void> {
  const own = sessionStorage.getItem(TOKEN) ? undefined : sessionTokens()[id];
  await attach(client.session(id, own ? { token: own } : {}));
}

takeLinkToken();
/** Offers the deployment's identity provider, if it has one; completes a sign-in with it. */
async function oidc(): Promise<void> {
  const token = await completeSignIn();
  if (token) sessionStorage.setItem(TOKEN, token);
  const p = await provider();
  if (!p) return;
  byId('oidc').hidden = false;
  on('oidc-sign-in', 'click', () => void attempt(() => signIn(p)));
}
await attempt(oidc);
void attempt(async () => {
  const id = new URL(location.href).searchParams.get('session');
  await Promise.all([loadAgents().catch((e) => (id ? undefined : Promise.reject(e))), id ? open(id) : undefined]);
});
