// One-way media on live data: the scenarios' e2e case (test_real_ua.py) has a
// baresip call whose callee it killed; rtpagent reported the silent direction
// and the server marked the call. In the console, from that live server: the
// Overview counts and lists the call under one-way media, the live table says
// "no media" instead of a MOS, and the session page names the silent
// direction and shows no quality for it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { openBrowser, screenshot, type Browser } from './browser';

function env(name: string): string {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: run through scenarios/tests/e2e/test_real_ua.py`);
  return v;
}

const BASE = env('P4RELAY_LIVE_URL');
const SESSION = env('P4RELAY_LIVE_SESSION');
const CALL_ID = env('P4RELAY_LIVE_CALL_ID');
const SILENT = env('P4RELAY_LIVE_SILENT');
const LABEL: Record<string, string> = { caller_to_callee: 'caller → callee', callee_to_caller: 'callee → caller' };
const OTHER = SILENT === 'caller_to_callee' ? 'callee_to_caller' : 'caller_to_callee';

let browser: Browser | undefined;
let page: Page;
const consoleErrors: string[] = [];

beforeAll(async () => {
  browser = await openBrowser(BASE);
  page = browser.page;
  page.on('console', (m) => { if (m.type() === 'error') consoleErrors.push(m.text()); });
  page.on('pageerror', (e) => { consoleErrors.push(String(e)); });
  await page.goto('/login');
  await page.getByLabel('Username').fill(env('P4RELAY_LIVE_USER'));
  await page.getByLabel('Password').fill(env('P4RELAY_LIVE_PASSWORD'));
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('heading', { name: 'Overview' }).waitFor();
});

afterAll(async () => {
  await browser?.close();
});

describe('one-way media on live data', () => {
  it('the Overview counts the call and lists it with its silent direction', async () => {
    await expect.poll(() => page.getByTestId('kpi-one-way').textContent(), { timeout: 20_000 }).toBe('1 call');
    const table = page.getByRole('table', { name: 'Calls with one-way media' });
    const row = table.getByRole('row').filter({ hasText: CALL_ID });
    await expect.poll(() => row.count(), { timeout: 10_000 }).toBe(1);
    expect(await row.getByRole('cell').nth(1).textContent()).toBe(LABEL[SILENT]);
    await screenshot(page, 'one-way-overview');
  });

  it('the live table shows no media instead of a MOS', async () => {
    await page.getByRole('link', { name: 'Live sessions table →' }).click();
    const row = page.getByRole('row').filter({ hasText: CALL_ID });
    await expect.poll(() => row.count(), { timeout: 10_000 }).toBe(1);
    expect(await row.textContent()).toContain('no media');
  });

  it('the session page names the silent direction and rates only the other', async () => {
    await page.goto(`/sessions/${SESSION}`);
    const badge = page.getByTestId('session-one-way');
    await badge.waitFor({ timeout: 15_000 });
    expect(await badge.textContent()).toBe(`one-way media: no media ${LABEL[SILENT] ?? SILENT}`);
    expect(await page.getByTestId(`quality-${SILENT}`).textContent()).toBe('no media');
    // The flowing direction is rated: a MOS, its packets, none lost.
    const other = await page.getByTestId(`quality-${OTHER}`).textContent();
    expect(other).toMatch(/^\d\.\d\d \(\w+\) \([\d,]+ packets, 0 lost\)$/);
    const events = page.getByRole('region', { name: 'Session events', exact: true });
    await expect.poll(() => events.textContent(), { timeout: 10_000 }).toContain('one_way_media');
    await screenshot(page, 'one-way-session');
    expect(consoleErrors).toEqual([]);
  });
});
