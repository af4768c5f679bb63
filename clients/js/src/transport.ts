// HTTP to one helix-edge deployment: URLs, the bearer token, JSON bodies, typed errors.

import { HttpError } from './errors.js';

/** A token, or a function that returns the current one (refreshed tokens). */
export type TokenSource = string | undefined | (() => string | undefined | Promise<string | undefined>);

export interface ClientOptions {
  /** The worker's origin, e.g. `https://agents.example.com` (a path prefix is kept). */
  baseUrl: string;
  /** An API token or a session token, sent as `Authorization: Bearer …`. */
  token?: TokenSource;
  /** The `fetch` to use (default: the global one), e.g. a Service Binding's. */
  fetch?: typeof fetch;
  /** Headers added to every request. */
  headers?: Record<string, string>;
}

export interface RequestOptions {
  body?: unknown;
  query?: Record<string, string | number | boolean | undefined>;
  headers?: Record<string, string>;
  signal?: AbortSignal | undefined;
}

export class Transport {
  readonly baseUrl: string;
  private readonly fetchFn: typeof fetch;

  constructor(
    private readonly options: ClientOptions,
    private readonly token: TokenSource = options.token,
  ) {
    this.baseUrl = options.baseUrl.replace(/\/+$/, '');
    // Bound, so that a browser's `window.fetch` is not called on another object.
    const f = options.fetch ?? globalThis.fetch;
    this.fetchFn = (input, init) => f(input, init);
  }

  /** The same deployment with another token (a session's own). */
  withToken(token: TokenSource): Transport {
    return new Transport(this.options, token);
  }

  /** The current token, if any. */
  async currentToken(): Promise<string | undefined> {
    return typeof this.token === 'function' ? await this.token() : this.token;
  }

  url(path: string, query: RequestOptions['query'] = {}): string {
    const params = new URLSearchParams();
    for (const [k, v] of Object.entries(query)) if (v !== undefined) params.set(k, String(v));
    const qs = params.toString();
    return `${this.baseUrl}${path}${qs ? `?${qs}` : ''}`;
  }

  /** Sends a request; a non-2xx answer is thrown as an [`HttpError`]. */
  async send(method: string, path: string, opts: RequestOptions = {}): Promise<Response> {
    const headers: Record<string, string> = { ...this.options.headers, ...opts.headers };
    const token = await this.currentToken();
    if (token) headers.authorization = `Bearer ${token}`;
    let body: string | undefined;
    if (opts.body !== undefined) {
      headers['content-type'] = 'application/json';
      body = JSON.stringify(opts.body);
    }
    const res = await this.fetchFn(this.url(path, opts.query), {
      method,
      headers,
      body,
      signal: opts.signal ?? null,
    });
    if (!res.ok) throw await HttpError.from(res);
    return res;
  }

  /** Sends a request and reads its JSON answer (`undefined` for 204). */
  async json<T>(method: string, path: string, opts: RequestOptions = {}): Promise<T> {
    const res = await this.send(method, path, opts);
    if (res.status === 204) return undefined as T;
    return (await res.json()) as T;
  }
}
