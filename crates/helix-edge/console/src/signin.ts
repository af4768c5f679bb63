// Sign-in through the deployment's OpenID Connect provider, where it configures one
// (`GET /v1/auth/oidc`): the authorization code flow with PKCE (S256). The verifier and
// the `state` stay in this tab; the worker exchanges the code the provider sends back
// for the ID token, which the console then uses as its token.

const PENDING = 'helix-edge.oidc';

interface Provider {
  issuer: string;
  clientId: string;
  authorizationEndpoint: string;
  scope: string;
}

const b64url = (bytes: Uint8Array) =>
  btoa(String.fromCharCode(...bytes)).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
const random = (n: number) => b64url(crypto.getRandomValues(new Uint8Array(n)));
const redirectUri = () => `${location.origin}/`;

/** The provider the deployment signs in with, if it has one. */
export async function provider(): Promise<Provider | undefined> {
  const res = await fetch('/v1/auth/oidc');
  const p = res.ok ? ((await res.json()) as Partial<Provider>) : {};
  return p.authorizationEndpoint ? (p as Provider) : undefined;
}

/** Sends the user to the provider to sign in; they come back to this page. */
export async function signIn(p: Provider): Promise<void> {
  const verifier = random(32);
  const state = random(16);
  const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', new TextEncoder().encode(verifier)));
  sessionStorage.setItem(PENDING, JSON.stringify({ verifier, state }));
  const url = new URL(p.authorizationEndpoint);
  for (const [k, v] of Object.entries({
    response_type: 'code',
    client_id: p.clientId,
    redirect_uri: redirectUri(),
    scope: p.scope,
    state,
    code_challenge: b64url(digest),
    code_challenge_method: 'S256',
  })) url.searchParams.set(k, v);
  location.assign(url.toString());
}

/**
 * On the way back from the provider (`?code=…&state=…`): the token for the code, after
 * checking the `state` is this tab's; the parameters are taken out of the URL.
 * `undefined` when the page was not opened by the provider.
 */
export async function completeSignIn(): Promise<string | undefined> {
  const url = new URL(location.href);
  const code = url.searchParams.get('code');
  const state = url.searchParams.get('state');
  const error = url.searchParams.get('error');
  if (!code && !error) return undefined;
  for (const k of ['code', 'state', 'error', 'error_description', 'iss', 'session_state']) url.searchParams.delete(k);
  history.replaceState(null, '', url);
  const pending = JSON.parse(sessionStorage.getItem(PENDING) ?? 'null') as { verifier: string; state: string } | null;
  sessionStorage.removeItem(PENDING);
  if (error) throw new Error(`The identity provider refused the sign-in (${error}).`);
  if (!pending || pending.state !== state) throw new Error('The sign-in did not start in this tab; try again.');
  const res = await fetch('/v1/auth/oidc/token', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ code, codeVerifier: pending.verifier, redirectUri: redirectUri() }),
  });
  const body = await res.json();
  if (!res.ok) throw new Error(`${body?.error?.message ?? 'The sign-in failed.'} (${body?.error?.code ?? res.status})`);
  return body.token as string;
}
