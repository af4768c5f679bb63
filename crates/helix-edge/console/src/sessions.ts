// The sessions pane: the signed-in caller's sessions from the worker's list (what their
// token reaches: all of them for the API token, a user's own or their tenant's),
// newest first, filterable by agent and status, read again when the caller starts or
// opens one and every few seconds while the page is shown. A session token lists
// nothing (its session is the one open).

import { HelixClient, HttpError, type SessionStatus, type SessionSummary } from '@helix-edge/client';
import { h } from './dom.js';

/** How often the list is read again (ms). */
const POLL_MS = 5000;

export class SessionList {
  private timer: ReturnType<typeof setTimeout> | undefined;
  private current: string | undefined;

  constructor(
    private readonly list: HTMLElement,
    private readonly agent: HTMLSelectElement,
    private readonly status: HTMLSelectElement,
    private readonly client: HelixClient,
    private readonly open: (sessionId: string) => void,
  ) {
    agent.addEventListener('change', () => void this.refresh());
    status.addEventListener('change', () => void this.refresh());
  }

  /** Marks `id` as the open session. */
  select(id: string): void {
    this.current = id;
    for (const item of this.list.querySelectorAll('[aria-current]')) item.removeAttribute('aria-current');
    document.getElementById(itemId(id))?.setAttribute('aria-current', 'true');
  }

  /** The agents to filter by. */
  agents(names: string[]): void {
    const chosen = this.agent.value;
    this.agent.replaceChildren(h('option', { value: '' }, 'Every agent'), ...names.map((n) => h('option', { value: n }, n)));
    this.agent.value = names.includes(chosen) ? chosen : '';
  }

  /** Reads the list again, and again in a moment. */
  async refresh(): Promise<void> {
    clearTimeout(this.timer);
    try {
      const page = await this.client.sessions({
        limit: 50,
        agent: this.agent.value || undefined,
        status: (this.status.value || undefined) as SessionStatus | undefined,
      });
      this.render(page.sessions);
    } catch (e) {
      const why = e instanceof HttpError ? (e.status === 403 ? 'A session token lists no sessions.' : `${e.message} (${e.code})`) : String(e);
      this.list.replaceChildren(h('li', { class: 'empty' }, why));
      if (e instanceof HttpError && (e.status === 403 || e.code === 'not_found')) return;
    }
    this.timer = setTimeout(() => void this.refresh(), POLL_MS);
  }

  private render(sessions: SessionSummary[]): void {
    if (sessions.length === 0) {
      this.list.replaceChildren(h('li', { class: 'empty' }, 'No sessions yet. Start one above.'));
      return;
    }
    this.list.replaceChildren(
      ...sessions.map((s) =>
        h('li', { id: itemId(s.sessionId), ...(s.sessionId === this.current ? { 'aria-current': 'true' } : {}) },
          h('button', { type: 'button', class: 'session-item', onclick: () => this.open(s.sessionId) },
            h('span', { class: 'session-agent' }, s.agent),
            h('span', { class: `badge status-${s.status}` }, s.status),
            h('span', { class: 'session-id' }, s.sessionId),
            h('time', { datetime: new Date(s.updatedAt).toISOString() }, new Date(s.updatedAt).toLocaleString()),
            s.owner ? h('span', { class: 'session-owner' }, s.owner.subject) : ''),
        ),
      ),
    );
  }
}

function itemId(sessionId: string): string {
  return `session-item-${sessionId}`;
}
