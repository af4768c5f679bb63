// A chat page on the AI SDK alone (no framework): a small `AbstractChat` subclass whose
// state re-renders the page, `DefaultChatTransport` pointed at helix-edge's /v1/chat,
// approvals answered with `addToolApprovalResponse`, the client tool `ask_user`
// answered with `addToolOutput`. React apps get the same with `useChat` (README).

import {
  AbstractChat,
  DefaultChatTransport,
  lastAssistantMessageIsCompleteWithApprovalResponses as approvalsAnswered,
  lastAssistantMessageIsCompleteWithToolCalls as toolsAnswered,
} from 'ai';

const $ = (id) => document.getElementById(id);

/** The chat's state, as a framework binding keeps it; every change renders. */
class PageState {
  #messages = [];
  #status = 'ready';
  error = undefined;
  get messages() { return this.#messages; }
  set messages(m) { this.#messages = [...m]; render(); }
  get status() { return this.#status; }
  set status(s) { this.#status = s; render(); }
  pushMessage = (m) => { this.#messages = this.#messages.concat(m); render(); };
  popMessage = () => { this.#messages = this.#messages.slice(0, -1); render(); };
  replaceMessage = (i, m) => {
    this.#messages = [...this.#messages.slice(0, i), this.snapshot(m), ...this.#messages.slice(i + 1)];
    render();
  };
  snapshot = (v) => structuredClone(v);
}

class Chat extends AbstractChat {
  constructor(init) { super({ ...init, state: new PageState() }); }
}

// One chat per tab; its id (the helix-edge session id) survives a reload.
const url = new URL(location.href);
const reloaded = url.searchParams.has('chat');
const id = url.searchParams.get('chat') ?? `chat-${crypto.randomUUID()}`;
url.searchParams.set('chat', id);
history.replaceState(null, '', url);

const chat = new Chat({
  id,
  transport: new DefaultChatTransport({ api: '/v1/chat', body: { agent: 'assistant' } }),
  sendAutomaticallyWhen: (o) => approvalsAnswered(o) || toolsAnswered(o),
});

function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (typeof v === 'function') e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  e.append(...children);
  return e;
}

function toolPart(part) {
  const name = part.type.slice('tool-'.length);
  const box = el('div', { class: 'tool' }, `${name} ${JSON.stringify(part.input ?? {})}: ${part.state}`);
  if (part.state === 'approval-requested') {
    const answer = (approved) => () =>
      chat.addToolApprovalResponse({ id: part.approval.id, approved, reason: approved ? undefined : 'Denied in the page.' });
    box.append(' ', el('button', { onclick: answer(true) }, 'Approve'), ' ', el('button', { onclick: answer(false) }, 'Deny'));
  }
  if (part.state === 'input-available' && name === 'ask_user') {
    const input = el('input', { 'aria-label': part.input.question });
    const send = (ev) => {
      ev.preventDefault();
      chat.addToolOutput({ tool: name, toolCallId: part.toolCallId, output: input.value });
    };
    box.append(el('form', { onsubmit: send }, el('span', {}, part.input.question), input, el('button', {}, 'Answer')));
  }
  if (part.state === 'output-available') box.append(` → ${JSON.stringify(part.output)}`);
  if (part.state === 'output-error') box.append(` → ${part.errorText}`);
  return box;
}

function render() {
  if (!chat) return;
  $('status').textContent = chat.status === 'ready' ? '' : `${chat.status}${chat.error ? `: ${chat.error.message}` : ''}`;
  $('messages').replaceChildren(
    ...chat.messages.map((m) =>
      el(
        'li',
        { class: m.role },
        el('span', { class: 'role' }, m.role === 'user' ? 'You' : 'Agent'),
        ...m.parts.map((p) =>
          p.type === 'text' ? p.text : p.type === 'reasoning' ? `(${p.text})` : p.type.startsWith('tool-') ? toolPart(p) : '',
        ),
      ),
    ),
  );
}

$('send').addEventListener('submit', (ev) => {
  ev.preventDefault();
  const text = $('input').value;
  $('input').value = '';
  chat.sendMessage({ text });
});

// After a reload: the run in progress, if any, continues streaming (204 when none).
if (reloaded) chat.resumeStream();
render();
