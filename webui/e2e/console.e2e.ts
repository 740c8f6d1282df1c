// The console against the real server + PostgreSQL: log in, live sessions,
// a new session within 1 s, filters, session detail with charts and the
// reroute on its timeline, switches, events, audit + CSV, admin. Screenshots
// of each page go to webui/test-artifacts/.
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { axeViolations, type Violation } from './a11y';
import { openBrowser, screenshot, type Browser } from './browser';
import { startStack, type Stack } from './harness';
import { ACTIVE_CALLS, callId, ENDED_CALLS, ingest, RELAY_TABLE_USED, REROUTED, samples, seed, session } from './seed';

let stack: Stack | undefined;
let browser: Browser | undefined;
let page: Page;
let detailUrl = '';
const a11y = new Map<string, Violation[]>();

/** Screenshot plus a WCAG 2.1 AA audit of what is on screen. */
async function capture(name: string): Promise<void> {
  await screenshot(page, name);
  a11y.set(name, await axeViolations(page));
}

/** Every chart drew its lines (ECharts SVG: one <path> per series and axis line). */
async function chartsDrawn(n: number): Promise<void> {
  const charts = page.getByTestId('chart');
  await expect.poll(() => charts.count(), { timeout: 20_000 }).toBe(n);
  for (let i = 0; i < n; i++) {
    await expect.poll(() => charts.nth(i).locator('svg path').count(), { timeout: 20_000 }).toBeGreaterThan(3);
  }
}
const consoleErrors: string[] = [];

beforeAll(async () => {
  stack = await startStack();
  await seed(live().baseUrl, live().ingestToken);
  browser = await openBrowser(live().baseUrl);
  page = browser.page;
  page.on('console', (m) => { if (m.type() === 'error') consoleErrors.push(m.text()); });
  page.on('pageerror', (e) => { consoleErrors.push(String(e)); });
});

let failed = false;
afterEach(async (ctx) => {
  if (ctx.task.result?.state !== 'fail') return;
  failed = true;
  // What the browser showed when the test failed.
  await screenshot(page, `FAILED-${ctx.task.name.replace(/[^a-z0-9]+/gi, '-').slice(0, 60)}`).catch(() => undefined);
});

afterAll(async () => {
  if (failed) console.error(`server log (tail):\n${stack?.serverLog().slice(-4000) ?? ''}`);
  await browser?.close();
  await stack?.stop();
});

const count = () => page.getByTestId('live-count');

function live(): Stack {
  if (!stack) throw new Error('stack not started');
  return stack;
}

describe('operator console (real server)', () => {
  it('refuses a wrong password, then logs in', async () => {
    await page.goto('/');
    await page.waitForURL('**/login');
    await page.getByLabel('Username').fill(live().username);
    await page.getByLabel('Password').fill('wrong-password-123');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await expect.poll(() => page.getByRole('alert').textContent()).toContain('wrong username or password');
    await capture('01-login');
    await page.getByLabel('Password').fill(live().password);
    await page.getByRole('button', { name: 'Sign in' }).click();
    // The overview is the landing page; the live table is one click away.
    await page.getByRole('heading', { name: 'Overview' }).waitFor();
    consoleErrors.length = 0; // the refused login's 401 was expected
    await capture('01b-overview');
    await page.getByRole('link', { name: 'Live', exact: true }).click();
    await page.getByRole('heading', { name: 'Live sessions' }).waitFor();
  });

  it('shows the live sessions and the header summary', async () => {
    await expect.poll(() => count().textContent(), { timeout: 10_000 }).toBe(`${String(ACTIVE_CALLS)} of ${String(ACTIVE_CALLS)} sessions`);
    await expect.poll(() => page.getByRole('status').filter({ hasText: /^live$/ }).count()).toBe(1);
    expect(await page.getByTestId('sum-active').textContent()).toBe(String(ACTIVE_CALLS));
    const summary = page.getByRole('list', { name: 'Live summary' });
    expect(await summary.textContent()).toContain('1 port'); // port 2 is congested
    // Virtualised: the DOM holds a screenful, not all 300 rows.
    const rendered = await page.getByTestId('row').count();
    expect(rendered).toBeGreaterThan(10);
    expect(rendered).toBeLessThan(ACTIVE_CALLS);
    await capture('02-live-sessions');
  });

  it('shows a newly ingested session within 1 s', async () => {
    const i = 9001;
    const t0 = Date.now();
    await ingest(live().baseUrl, live().ingestToken, { sessions: [session(i, Date.now(), { answered_at: new Date().toISOString() })] });
    await page.getByRole('link', { name: callId(i) }).waitFor({ timeout: 1000 });
    const elapsed = Date.now() - t0;
    console.log(`new session visible ${String(elapsed)} ms after the ingest request started`);
    expect(elapsed).toBeLessThan(1000);
    await expect.poll(() => count().textContent()).toBe(`${String(ACTIVE_CALLS + 1)} of ${String(ACTIVE_CALLS + 1)} sessions`);
  });

  it('drops a session from the live table when it ends', async () => {
    const i = 9001;
    await ingest(live().baseUrl, live().ingestToken, {
      sessions: [session(i, Date.now(), { seq: 2, state: 'ended', ended_at: new Date().toISOString() })],
    });
    await page.getByRole('link', { name: callId(i) }).waitFor({ state: 'detached', timeout: 2000 });
  });

  it('updates quality live from streamed samples', async () => {
    // One more second of samples for every call; call 12 starts losing 20 % of its packets.
    // Seeded before the console opened: 30 s × 2 directions × 50 packets, no loss,
    // shown from the server's running counters; caller and callee from its legs.
    await page.getByLabel('Filter sessions').fill(callId(12));
    const row = page.getByTestId('row').filter({ hasText: callId(12) });
    await expect.poll(() => row.textContent(), { timeout: 2000 }).toContain('3000');
    expect(await row.textContent()).toContain('0.00 %');
    expect(await row.textContent()).toContain('198.18.1.10:6024');
    expect(await row.textContent()).toContain('198.18.2.10:6024');
    const now = Date.now();
    const batch = [];
    for (let i = 1; i <= ACTIVE_CALLS; i++) batch.push(...samples(i, now + 1000, 1, i === 12 ? 10 : undefined));
    await ingest(live().baseUrl, live().ingestToken, { samples: batch });
    await expect.poll(() => row.locator('.badge').textContent(), { timeout: 2000 }).toMatch(/^[12]\.\d\d/);
    // Running totals: 3000 + 2 × 40 packets, 2 × 10 lost → 20 / 3100.
    await expect.poll(() => row.textContent(), { timeout: 2000 }).toContain('3080');
    expect(await row.textContent()).toContain('0.65 %');
    await page.getByLabel('Filter sessions').fill('');
    await capture('02b-live-after-samples');
  });

  it('filters by text, relay and degraded MOS', async () => {
    await page.getByLabel('Filter sessions').fill(callId(42).slice(0, 13));
    await expect.poll(() => count().textContent()).toBe(`1 of ${String(ACTIVE_CALLS)} sessions`);
    await page.getByLabel('Filter sessions').fill('');
    await page.getByLabel('Relayed by').selectOption('rtpproxy');
    const onRtpproxy = Math.floor(ACTIVE_CALLS / 5);
    await expect.poll(() => count().textContent()).toBe(`${String(onRtpproxy)} of ${String(ACTIVE_CALLS)} sessions`);
    expect(await page.getByText('RTPProxy (relay table full)').count()).toBeGreaterThan(0);
    await capture('03-live-filtered-rtpproxy');
    await page.getByLabel('Relayed by').selectOption('all');
    await page.getByLabel('MOS < 3.6 only').check();
    // Every 9th call is seeded with 6 of 50 packets lost per interval, and call 12 degraded live.
    await expect.poll(() => count().textContent()).toBe(`${String(Math.floor(ACTIVE_CALLS / 9) + 1)} of ${String(ACTIVE_CALLS)} sessions`);
    await page.getByLabel('MOS < 3.6 only').uncheck();
  });

  it('opens a session with its charts and the reroute on its timeline', async () => {
    await page.getByLabel('Filter sessions').fill(callId(REROUTED));
    await page.getByRole('link', { name: callId(REROUTED) }).click();
    await page.getByRole('heading', { name: /Session/ }).waitFor();
    await chartsDrawn(6); // 4 quality charts, the path, the timeline
    detailUrl = page.url();
    // The reroute names a watched destination; the server links the call to it by its media address.
    const path = page.getByRole('table', { name: 'Path segments' });
    expect(await path.locator('tbody tr').count()).toBe(2);
    expect(await path.locator('tbody tr').nth(0).textContent()).toMatch(/sw1.*198\.18\.2\.0\/24.*port 2.*primary next hop/);
    expect(await path.locator('tbody tr').nth(1).textContent()).toMatch(/sw1.*nexthop 4 port 4.*now.*sw1 port 2.*queue delay 4\.2 ms/);
    expect(await page.getByRole('table', { name: 'Legs and rewrite entries' }).textContent()).toContain('198.18.0.10:');
    const reroute = page.locator('[data-testid="event-timeline"] tr[data-type="reroute"]');
    await reroute.waitFor();
    expect(await reroute.textContent()).toContain('port 2 → nexthop 4 port 4 (queue delay 4.2 ms > t_q 2 ms for 5 packets)');
    // The timeline chart has a row for reroute.
    expect(await page.getByRole('figure', { name: 'Session events timeline' }).textContent()).toContain('reroute');
    await capture('04-session-detail');
  });

  it('updates the open session live when its samples arrive', async () => {
    const sampled = page.getByTestId('session-packets');
    const before = await sampled.textContent();
    await ingest(live().baseUrl, live().ingestToken, { samples: samples(REROUTED, Date.now() + 2000, 1) });
    // Stream → refetch of the detail, well before the 10 s fallback poll.
    await expect.poll(() => sampled.textContent(), { timeout: 3000 }).not.toBe(before);
  });

  it('shows switch queues, drops and relay table use', async () => {
    await page.getByRole('link', { name: 'Switches' }).click();
    await page.getByRole('heading', { name: 'Switches' }).waitFor();
    await chartsDrawn(6); // 4 of the switch, 2 of every hop
    // Every hop: sw1's polled ports and sw2's INT-reported ones.
    const hops = page.getByRole('table', { name: 'Hops' });
    await expect.poll(() => hops.locator('tbody tr').count()).toBe(6);
    expect(await hops.textContent()).toContain('sw2 port 3');
    expect(await page.getByRole('table', { name: 'Ports' }).textContent()).toContain('p4r-sw-2');
    expect(await page.getByTestId('relay-occupancy').textContent()).toBe('1,000 of 65,536 relay entries in use (1.5 %)');
    expect(await page.locator('meter.occupancy').getAttribute('value')).toBe(String(RELAY_TABLE_USED));
    await capture('05-switches');
  });

  it('takes a switch out of service after a confirmation, shows its evacuation, and returns it', async () => {
    // rtpagent's poll, as the agent posts it: its mode and figures in, the operator's modes out.
    const poll = async (mode: string, offloaded: number): Promise<{ switch_mode: string }> => {
      const r = await fetch(`${live().baseUrl}/api/v1/maintenance/poll`, {
        method: 'POST',
        headers: { Authorization: `Bearer ${live().ingestToken}`, 'Content-Type': 'application/json' },
        body: JSON.stringify({ agent: 'e2e-agent-1', switch: 'sw1', mode, offloaded, capacity: 1000, by_pipe: { 0: offloaded } }),
      });
      expect(r.status).toBe(200);
      return await r.json() as { switch_mode: string };
    };
    expect((await poll('active', 250)).switch_mode).toBe('active');
    const state = page.getByTestId('switch-maintenance');
    await expect.poll(() => page.getByTestId('offloaded-calls').textContent(), { timeout: 10_000 }).toBe('250');
    expect(await state.textContent()).toBe('in service');
    // Asked first; cancelling changes nothing.
    await page.getByRole('button', { name: 'Take out of service' }).click();
    const dialog = page.getByRole('alertdialog');
    expect(await dialog.textContent()).toContain('Take sw1 out of service? Its 250 offloaded calls move back to RTPProxy');
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    expect(await page.getByRole('alertdialog').count()).toBe(0);
    expect(await poll('active', 250)).toEqual({ agent_mode: 'active', switch_mode: 'active', switch_cap: null });
    // Confirmed: the switch is out of service; the agent hears it at its next poll.
    await page.getByRole('button', { name: 'Take out of service' }).click();
    await page.getByRole('alertdialog').getByRole('button', { name: 'Confirm' }).click();
    await expect.poll(() => state.textContent(), { timeout: 10_000 }).toBe('out of service (evacuating)');
    expect(await page.getByRole('alertdialog').count()).toBe(0);
    expect((await poll('active', 250)).switch_mode).toBe('out_of_service');
    await poll('evacuated', 0);
    await expect.poll(() => state.textContent(), { timeout: 10_000 }).toBe('out of service (evacuated)');
    expect(await page.getByTestId('maintenance').textContent()).toContain(`set by ${live().username}`);
    expect(await page.getByTestId('agent-mode-e2e-agent-1').textContent()).toBe('evacuated');
    await capture('05b-switch-out-of-service');
    await page.getByRole('button', { name: 'Return to service' }).click();
    await page.getByRole('alertdialog').getByRole('button', { name: 'Confirm' }).click();
    await expect.poll(() => state.textContent(), { timeout: 10_000 }).toBe('in service');
    expect((await poll('active', 0)).switch_mode).toBe('active');
  });

  it('shows reroute, congestion and offload failures on the events page', async () => {
    await page.getByRole('link', { name: 'Events' }).click();
    await page.getByRole('heading', { name: 'Events' }).waitFor();
    const list = page.getByRole('table', { name: 'Events timeline (list)' });
    await list.locator('tr[data-type="reroute"]').waitFor();
    for (const t of ['congestion_onset', 'congestion_clear', 'offload_failed', 'fallback', 'ired_drop']) {
      expect(await list.locator(`tr[data-type="${t}"]`).count(), t).toBeGreaterThan(0);
    }
    // The reroute and the congestion episodes in their own lists, the open one first.
    const reroutes = page.getByRole('table', { name: 'Reroutes' });
    await reroutes.locator('tr[data-direction="to_backup"]').waitFor();
    expect(await reroutes.textContent()).toContain('port 2 → nexthop 4 port 4');
    // local detection: the congestion was at the moving switch's own port
    expect(await reroutes.locator('tr[data-direction="to_backup"]').first().textContent()).toContain('sw1 port 2');
    const episodes = page.getByRole('table', { name: 'Congestion episodes' });
    await expect.poll(() => episodes.locator('tbody tr').count()).toBe(2);
    expect(await episodes.locator('tbody tr').first().textContent()).toMatch(/sw1 port 2.*ongoing/);
    expect(await episodes.locator('tr[data-open="no"]').textContent()).toMatch(/sw1 port 3.*0:50/);
    // Live: a reroute arriving on the stream shows without a reload (the poll is 15 s).
    await ingest(live().baseUrl, live().ingestToken, {
      events: [{ event_id: randomUUID(), type: 'reroute', ts: new Date().toISOString(), severity: 'info', switch: 'sw1',
        payload: { flow: '198.18.2.0/24', from_path: 'nexthop 4 port 4', to_path: 'port 2', trigger: 'primary clear for 2000 ms', direction: 'to_primary' } }],
    });
    await reroutes.locator('tr[data-direction="to_primary"]').waitFor({ timeout: 5000 });
    await capture('06-events');
    await page.getByLabel('Event type').selectOption('reroute');
    await expect.poll(() => list.locator('tbody tr').count()).toBe(2);
    await page.getByLabel('Event type').selectOption('');
  });

  it('searches the audit trail with server filters and exports CSV', async () => {
    await page.getByRole('link', { name: 'Audit' }).click();
    await page.getByRole('heading', { name: 'Audit' }).waitFor();
    await page.getByLabel('State').selectOption('ended');
    await page.getByRole('button', { name: 'Search' }).click();
    // The ended call 9001 from the live test is in the trail too.
    await expect.poll(() => page.getByTestId('audit-count').textContent()).toBe(`${String(ENDED_CALLS + 1)} sessions`);
    await capture('07-audit');
    const [download] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: 'Export CSV' }).click()]);
    const path = await download.path();
    const csv = readFileSync(path, 'utf8').trim().split('\n');
    expect(csv[0]?.startsWith('id,session_key,call_id')).toBe(true);
    expect(csv).toHaveLength(ENDED_CALLS + 2);
    expect(csv.slice(1).every((l) => l.includes(',ended,'))).toBe(true);
    // A bad filter gets the server's reason, not a blank table.
    await page.getByLabel('Address').fill('not-an-address');
    await page.getByRole('button', { name: 'Search' }).click();
    await expect.poll(() => page.getByRole('alert').textContent())
      .toBe('Search failed: query.address: Input is not a valid IPv4 address or Input is not a valid IPv6 address');
    consoleErrors.length = 0; // Chromium logs the (expected) 422
    await page.getByRole('button', { name: 'Clear' }).click();
  });

  it('lets the admin add a user and issue a read token', async () => {
    await page.getByRole('link', { name: 'Users & tokens' }).click();
    await page.getByRole('heading', { name: 'Users & API tokens' }).waitFor();
    const addUser = page.getByRole('form', { name: 'Add user' });
    await addUser.getByLabel('Username').fill('noc-viewer');
    await addUser.getByLabel('Password').fill('viewer-password-42');
    await addUser.getByRole('button', { name: 'Add user' }).click();
    await page.getByRole('table', { name: 'Users' }).getByText('noc-viewer').waitFor();
    const addToken = page.getByRole('form', { name: 'Create token' });
    await addToken.getByLabel('Name').fill('grafana');
    await addToken.getByRole('button', { name: 'Create token' }).click();
    const shown = page.getByRole('status').filter({ hasText: 'copy it now' });
    await shown.waitFor();
    expect(await shown.locator('pre').textContent()).toMatch(/^p4r_/);
    await capture('08-admin');
  });

  it('works from the keyboard alone: tab to a call, open it, come back', async () => {
    await page.getByRole('link', { name: 'Live', exact: true }).click();
    await page.getByLabel('Filter sessions').fill(callId(REROUTED));
    await page.getByLabel('Filter sessions').focus();
    const target = page.getByRole('link', { name: callId(REROUTED) });
    for (let i = 0; i < 30 && !(await target.evaluate((el) => el === document.activeElement)); i++) {
      await page.keyboard.press('Tab');
    }
    expect(await target.evaluate((el) => el === document.activeElement)).toBe(true);
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { name: /Session/ }).waitFor();
    await page.getByRole('link', { name: '← Live sessions' }).focus();
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { name: 'Live sessions' }).waitFor();
    await page.getByLabel('Filter sessions').fill('');
  });

  it('renders the dark theme', async () => {
    await page.getByRole('link', { name: 'Live', exact: true }).click();
    await page.getByRole('button', { name: 'Switch to dark theme' }).click();
    expect(await page.evaluate(() => document.documentElement.dataset.theme)).toBe('dark');
    await expect.poll(() => count().textContent()).toContain('sessions');
    await capture('09-live-dark');
    // A deep link (reload): the server answers client routes with the console.
    await page.goto(detailUrl);
    await chartsDrawn(6);
    await capture('10-session-detail-dark');
  });

  it('gives a viewer everything but user and token management', async () => {
    await page.getByRole('button', { name: 'Log out' }).click();
    await page.getByLabel('Username').fill('noc-viewer');
    await page.getByLabel('Password').fill('viewer-password-42');
    await page.getByRole('button', { name: 'Sign in' }).click();
    // Back where the session ended (the detail page); then to the live table.
    await page.getByRole('heading', { name: /Session/ }).waitFor();
    await page.getByRole('link', { name: 'Live', exact: true }).click();
    await expect.poll(() => count().textContent(), { timeout: 10_000 }).toBe(`${String(ACTIVE_CALLS)} of ${String(ACTIVE_CALLS)} sessions`);
    expect(await page.getByText('noc-viewer (viewer)').count()).toBe(1);
    expect(await page.getByRole('link', { name: 'Users & tokens' }).count()).toBe(0);
    await page.goto('/admin');
    await page.getByRole('alert').filter({ hasText: 'Only administrators' }).waitFor();
  });

  it('passes WCAG 2.1 AA checks (axe-core) on every page, light and dark', () => {
    const found = [...a11y].flatMap(([shot, vs]) => vs.map((v) => `${shot}: ${v.id} (${v.impact ?? '?'}) ${v.help} ${v.nodes.join(' ')}`));
    expect(a11y.size).toBeGreaterThanOrEqual(10);
    expect(found).toEqual([]);
  });

  it('logged no errors in the browser console', () => {
    expect(consoleErrors).toEqual([]);
  });
});
