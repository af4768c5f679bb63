// Errors the client throws: an HTTP answer that is not a success, and a stream that
// does not follow the protocol.

/** A non-2xx answer, with the API's error body (`code`, `message`, `retryable`). */
export class HttpError extends Error {
  override readonly name = 'HttpError';
  constructor(
    /** The HTTP status. */
    readonly status: number,
    /** The API's stable snake_case code (`http_<status>` when the body had none). */
    readonly code: string,
    message: string,
    /** Whether sending the same request again may succeed. */
    readonly retryable: boolean,
  ) {
    super(message);
  }

  /** Reads a failed response's body into an error. */
  static async from(res: Response): Promise<HttpError> {
    const text = await res.text().catch(() => '');
    let body: { error?: { code?: unknown; message?: unknown; retryable?: unknown } } = {};
    try {
      body = JSON.parse(text);
    } catch {
      // Not JSON: a proxy's page, say. The status speaks for it.
    }
    const e = body?.error ?? {};
    const code = typeof e.code === 'string' ? e.code : `http_${res.status}`;
    const message =
      typeof e.message === 'string' ? e.message : text.slice(0, 200) || `HTTP ${res.status}`;
    const retryable = typeof e.retryable === 'boolean' ? e.retryable : res.status >= 500 || res.status === 429;
    return new HttpError(res.status, code, message, retryable);
  }
}

/** The server's stream broke the protocol (a frame whose data is not a JSON object, a bad id). */
export class ProtocolError extends Error {
  override readonly name = 'ProtocolError';
}
