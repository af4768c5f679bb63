// Headless Chromium for the browser tests: Debian's `chromium` (or CHROMIUM_BIN),
// driven by puppeteer-core (whose own browser download does not work here).

import { existsSync } from 'node:fs';
import puppeteer from 'puppeteer-core';

const CHROMIUM = process.env.CHROMIUM_BIN ?? ['/usr/bin/chromium', '/usr/bin/chromium-browser'].find(existsSync);

export function launchBrowser() {
  if (!CHROMIUM) throw new Error('chromium is not installed (scripts/test.sh installs it; or set CHROMIUM_BIN)');
  return puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu'],
  });
}

/** Collects the page's errors (uncaught exceptions and console errors). */
export function pageErrors(page) {
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  page.on('console', (m) => m.type() === 'error' && errors.push(m.text()));
  return errors;
}
