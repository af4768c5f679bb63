// The Inbox view: the calls waiting on the signed-in user across sessions (approvals
// their sessions or their roles decide, client tools, and MCP servers' requests to
// connect or for input), newest first, read from the
// worker's `GET /v1/inbox` again every few seconds while the view is shown, so a new
// call appears without a reload. Each is answered where it lives, with a reason for an
// approval; a worker without the `inbox` feature has no Inbox tab.

import { HelixClient, HttpError, type InboxItem } from '@helix-edge/client';
import { askCard, asks } from './asks.js';
import { h, text } from './dom.js';

/** How often the shown inbox is read again (ms); D1's replication lag is well under it. */
const POLL_MS = 2000;

export interface InboxDeps {
  client: HelixClient;
  /** Runs an action, showing its error. */
  attempt: (action: () => Promise<unknown>) => Promise<void>;
  /** Opens a session in the Sessions view. */
  open: (sessionId: string) => void;
}

export class InboxView {
  private timer: ReturnType<typeof setTimeout> | undefined;
  private shown = false;
  /** Whether the worker serves the inbox (a 404 `not_found` says it does not). */
  served = true;

  constructor(
    private readonly root: HTMLElement,
    private readonly list: HTMLElement,
    private readonly badge: HTMLElement,
    private readonly deps: InboxDeps,
  ) {}

  show(): void {
    this.shown = true;
    this.root.hidden = false;
    void this.poll();
  }

  hide(): void {
    this.shown = false;
    this.root.hidden = true;
    clearTimeout(this.timer);
  }

  /** Reads the inbox once (the tab's count too); again in a moment while shown. */
  async poll(): Promise<void> {
    clearTimeout(this.timer);
    try {
      const page = await this.deps.client.inbox({ limit: 50 });
      this.render(page.items);
    } catch (e) {
      if (e instanceof HttpError && e.code === 'not_found') {
        this.served = false;
        return;
      }
      if (this.shown) this.list.replaceChildren(h('p', { class: 'empty error' }, `The inbox cannot be read: ${e instanceof HttpError ? `${e.message} (${e.code})` : String(e)}`));
    }
    if (this.shown) this.timer = setTimeout(() => void this.poll(), POLL_MS);
  }

  private render(items: InboxItem[]): void {
    this.badge.textContent = items.length ? String(items.length) : '';
    if (!this.shown) return;
    const keep = new Set(items.map((i) => cardId(i)));
    for (const card of [...this.list.children]) if (!keep.has(card.id)) card.remove();
    if (items.length === 0) {
      this.list.replaceChildren(h('p', { class: 'empty' }, 'Nothing waits on you. New approvals and questions appear here as they come.'));
      return;
    }
    this.list.querySelector('.empty')?.remove();
    // Newest first: a new card goes before the first older one.
    items.forEach((item, i) => {
      if (document.getElementById(cardId(item))) return;
      const card = this.card(item);
      this.list.insertBefore(card, this.list.children[i] ?? null);
    });
  }

  private card(item: InboxItem): HTMLElement {
    const id = cardId(item);
    if (asks(item)) {
      const card = askCard(item, id, () => this.deps.client.session(item.sessionId), this.deps.attempt, async () => {
        document.getElementById(id)?.remove();
        await this.poll();
      });
      card.classList.add('inbox-item', item.kind);
      return card;
    }
    const reason = h('input', { id: `${id}-reason`, autocomplete: 'off' }) as HTMLInputElement;
    const session = () => this.deps.client.session(item.sessionId);
    const done = async () => {
      document.getElementById(id)?.remove();
      await this.poll();
    };
    const approval = item.kind === 'approval';
    const answer = (approved: boolean) => () =>
      this.deps.attempt(async () => {
        const why = reason.value.trim() || undefined;
        await (approved ? session().approve(item.toolCallId, why) : session().deny(item.toolCallId, why));
        await done();
      });
    const respond = () =>
      this.deps.attempt(async () => {
        await session().submitResult(item.toolCallId, reason.value);
        await done();
      });
    const since = new Date(item.waitingSince).toLocaleString();
    const due = item.deadline ? ` · answer by ${new Date(item.deadline).toLocaleTimeString()}` : '';
    const who = item.approvers ? approversNote(item.approvers) : text('');
    return h(
      'article',
      { class: `card inbox-item ${item.kind}`, id, 'aria-label': `${approval ? 'Approval' : 'Question'}: ${item.toolName}` },
      h('header', {},
        h('span', { class: `badge ${item.kind}` }, approval ? 'Approval' : 'Client tool'),
        h('h3', {}, item.toolName),
        h('button', { type: 'button', class: 'link', onclick: () => this.deps.open(item.sessionId) }, `${item.agent} · ${item.sessionId}`)),
      h('p', { class: 'meta' }, `Waiting since ${since}${due}`),
      who,
      h('pre', {}, JSON.stringify(item.arguments, null, 2)),
      h('form', { onsubmit: (ev: Event) => { ev.preventDefault(); void (approval ? answer(true)() : respond()); } },
        h('label', { for: reason.id }, approval ? 'Reason (optional)' : 'Answer'),
        reason,
        h('button', { type: 'submit', class: 'primary' }, approval ? 'Approve' : 'Send'),
        approval ? h('button', { type: 'button', onclick: answer(false) }, 'Deny') : text('')),
    );
  }
}

/** Who may decide an approval that needs a role (the inbox's and the session's cards). */
export function approversNote(a: NonNullable<InboxItem['approvers']>): HTMLElement {
  const others = a.notOwner ? ', other than the requester,' : '';
  return h('p', { class: 'approvers' }, `Only someone with the role “${a.role}”${others} can decide this.`);
}

function cardId(item: InboxItem): string {
  return `inbox-${item.sessionId}-${item.toolCallId}`.replace(/[^A-Za-z0-9_-]/g, '_');
}
