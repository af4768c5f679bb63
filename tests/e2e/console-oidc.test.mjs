// Signing in to the console through the deployment's OpenID Connect provider (feature
// `users`, OIDC_CLIENT_ID set), in Chromium: a provider on loopback (discovery, an
// authorization endpoint that consents at once, a token endpoint that checks the code,
// the redirect URI, the client's secret and the PKCE verifier, a key set; RS256 keys
// made per run). The page sends the browser there and back, the worker exchanges the
// code for the ID token, and the user's session is theirs. A used code and a foreign
// redirect URI are refused; the client's secret is never shown.

import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { createHash, generateKeyPairSync, randomBytes, sign } from 'node:crypto';
import { launchBrowser, pageErrors } from './browser.mjs';
import { api, startWithMock } from './client.mjs';

const CLIENT_ID = 'helix-console';
const CLIENT_SECRET = 'console-secret';
const b64 = (v) => Buffer.from(typeof v === 'string' ? v : JSON.stringify(v)).toString('base64url');

/** A provider on loopback that signs `sub` in at once. */
async function provider(sub) {
  const { publicKey, privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const jwk = { ...publicKey.export({ format: 'jwk' }), kid: 'p1', alg: 'RS256', use: 'sig' };
  const codes = new Map();
  const state = { issued: [], redirectUri: undefined };
  const server = http.createServer(async (req, res) => {
    const url = new URL(req.url, state.issuer);
    const json = (status, body) => { res.writeHead(status, { 'content-type': 'application/json' }); res.end(JSON.stringify(body)); };
    if (url.pathname === '/.well-known/openid-configuration') {
      return json(200, { issuer: state.issuer, authorization_endpoint: `${state.issuer}/authorize`, token_endpoint: `${state.issuer}/token`, jwks_uri: `${state.issuer}/jwks` });
    }
    if (url.pathname === '/jwks') return json(200, { keys: [jwk] });
    if (url.pathname === '/authorize') {
      const q = url.searchParams;
      const ok = q.get('response_type') === 'code' && q.get('client_id') === CLIENT_ID && q.get('redirect_uri') === state.redirectUri
        && q.get('code_challenge_method') === 'S256' && q.get('code_challenge');
      if (!ok) return json(400, { error: 'invalid_request' });
      const code = randomBytes(16).toString('hex');
      codes.set(code, { challenge: q.get('code_challenge'), redirectUri: q.get('redirect_uri') });
      state.issued.push(code);
      res.writeHead(302, { location: `${q.get('redirect_uri')}?code=${code}&state=${encodeURIComponent(q.get('state'))}` });
      return res.end();
    }
    if (url.pathname === '/token' && req.method === 'POST') {
      let body = '';
      for await (const chunk of req) body += chunk;
      const f = new URLSearchParams(body);
      const grant = codes.get(f.get('code'));
      codes.delete(f.get('code')); // a code is good once
      const verified = grant && f.get('grant_type') === 'authorization_code' && f.get('client_id') === CLIENT_ID
        && f.get('client_secret') === CLIENT_SECRET && f.get('redirect_uri') === grant.redirectUri
        && createHash('sha256').update(f.get('code_verifier') ?? '').digest('base64url') === grant.challenge;
      if (!verified) return json(400, { error: 'invalid_grant' });
      const now = Math.floor(Date.now() / 1000);
      const input = `${b64({ alg: 'RS256', typ: 'JWT', kid: 'p1' })}.${b64({ iss: state.issuer, aud: CLIENT_ID, sub, iat: now, exp: now + 600 })}`;
      const idToken = `${input}.${sign('sha256', Buffer.from(input), privateKey).toString('base64url')}`;
      return json(200, { id_token: idToken, access_token: 'opaque', token_type: 'Bearer', expires_in: 600 });
    }
    json(404, { error: 'not_found' });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  state.issuer = `http://127.0.0.1:${server.address().port}`;
  state.close = () => new Promise((r) => server.close(r));
  return state;
}

let worker;
let llm;
let browser;
let idp;
before(async () => {
  browser = await launchBrowser();
  idp = await provider('olga');
  ({ worker, llm } = await startWithMock({
    JWT_ISSUER: idp.issuer, JWT_AUDIENCE: CLIENT_ID, JWT_ALGORITHMS: 'RS256', JWT_JWKS_URL: `${idp.issuer}/jwks`,
    OIDC_CLIENT_ID: CLIENT_ID, OIDC_CLIENT_SECRET: CLIENT_SECRET,
  }));
  idp.redirectUri = `${worker.baseUrl}/`;
});
after(async () => {
  await browser?.close();
  await worker?.stop();
  await llm?.close();
  worker?.cleanup();
  await idp?.close();
});

test('the console signs in through the provider and the session it starts is the user\'s', async () => {
  const page = await browser.newPage();
  const errors = pageErrors(page);
  await page.goto(`${worker.baseUrl}/`);
  await page.waitForSelector('#oidc:not([hidden])');
  await Promise.all([page.waitForNavigation(), page.$eval('#oidc-sign-in', (b) => b.click())]);
  // Back from the provider: the code was exchanged, the URL is clean, the API answers.
  await page.waitForSelector('#agent option[value="assistant"]');
  assert.equal(new URL(page.url()).search, '');
  const token = await page.evaluate(() => sessionStorage.getItem('helix-edge.token'));
  assert.equal(token.split('.').length, 3, 'the ID token is the console\'s token');

  llm.push({ text: 'Hello, Olga.' });
  await page.type('#first-message', 'hello');
  await page.click('#new-session button[type=submit]');
  await page.waitForFunction(() => /Status: completed/.test(document.querySelector('#status')?.textContent ?? ''));
  const id = new URL(page.url()).searchParams.get('session');
  const session = await api(worker, 'GET', `/v1/sessions/${id}`);
  assert.deepEqual(session.body.owner, { subject: 'olga' });
  // The first requests before signing in are 401s; nothing else failed.
  assert.ok(errors.every((e) => /401/.test(e)), errors.join('\n'));
  await page.close();

  // The provider's refusal (a code already used, here with a wrong verifier too) is 401;
  // a redirect URI that is not a page of this worker never reaches it (400).
  const exchange = (body) => api(worker, 'POST', '/v1/auth/oidc/token', body, null);
  const replayed = await exchange({ code: idp.issued.at(-1), codeVerifier: 'v'.repeat(43), redirectUri: `${worker.baseUrl}/` });
  assert.deepEqual([replayed.status, replayed.body.error?.code], [401, 'unauthorized']);
  const foreign = await exchange({ code: 'c', codeVerifier: 'v'.repeat(43), redirectUri: 'https://evil.example/' });
  assert.deepEqual([foreign.status, foreign.body.error?.code], [400, 'validation_error']);
  const config = await api(worker, 'GET', '/v1/auth/oidc', undefined, null);
  assert.deepEqual(config.body, { issuer: idp.issuer, clientId: CLIENT_ID, authorizationEndpoint: `${idp.issuer}/authorize`, scope: 'openid profile' });
  assert.ok(!JSON.stringify(config.body).includes(CLIENT_SECRET), 'the secret stays in the worker');
});
