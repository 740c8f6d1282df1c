// Chart truth: on a known dataset (e2e/seed.ts: 300 calls with samples, a
// rerouted call, a 4-second-old call, queue samples on 4 ports with port 2
// congested, congestion onset/clear events), every chart on every page must
// draw the expected series with its points inside the plot area and an x
// axis around the data, at 1280x800, 1440x900 and 1920x1080, light and dark. The header
// must fit one row of tools, the legs table its columns, the audit table its
// quality columns. One screenshot per page and variant in webui/test-artifacts/.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { openBrowser, screenshot, type Browser } from './browser';
import { chartsTrue, type ChartExpect } from './charts';
import { startStack, type Stack } from './harness';
import { ACTIVE_CALLS, BACKUP_PATH, callId, CONGESTED_PORT, ENDED_CALLS, INT_PORTS, INT_SWITCH, PORTS, PRIMARY_PATH, REROUTE_AGO_MS, REROUTED, seed, YOUNG } from './seed';

let stack: Stack | undefined;
let browser: Browser | undefined;
let page: Page;
let seededAt = 0;
const consoleErrors: string[] = [];
const MIN = 60_000;

function live(): Stack {
  if (!stack) throw new Error('stack not started');
  return stack;
}

beforeAll(async () => {
  stack = await startStack();
  seededAt = Date.now();
  await seed(live().baseUrl, live().ingestToken);
  browser = await openBrowser(live().baseUrl);
  page = browser.page;
  page.on('console', (m) => { if (m.type() === 'error') consoleErrors.push(m.text()); });
  page.on('pageerror', (e) => { consoleErrors.push(String(e)); });
  await page.goto('/login');
  await page.getByLabel('Username').fill(live().username);
  await page.getByLabel('Password').fill(live().password);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('heading', { name: 'Overview' }).waitFor();
});

afterEach(async (ctx) => {
  if (ctx.task.result?.state !== 'fail') return;
  await screenshot(page, `FAILED-charts-${ctx.task.name.replace(/[^a-z0-9]+/gi, '-').slice(0, 60)}`).catch(() => undefined);
});

afterAll(async () => {
  await browser?.close();
  await stack?.stop();
});

/** The header keeps brand, navigation and tools on one row and never overflows. */
async function headerFits(): Promise<void> {
  const r = await page.evaluate(() => {
    const bar = document.querySelector<HTMLElement>('[data-testid="topbar"]');
    const brand = bar?.querySelector('.brand')?.getBoundingClientRect();
    const logout = Array.from(bar?.querySelectorAll('button') ?? []).find((b) => b.textContent === 'Log out')?.getBoundingClientRect();
    return {
      overflow: bar ? bar.scrollWidth - bar.clientWidth : -1,
      brandMid: brand ? brand.top + brand.height / 2 : -1,
      logoutMid: logout ? logout.top + logout.height / 2 : -999,
      logoutRight: logout?.right ?? 0,
      width: window.innerWidth,
    };
  });
  expect(r.overflow, 'header overflows').toBeLessThanOrEqual(0);
  expect(Math.abs(r.logoutMid - r.brandMid), '"Log out" on the brand\'s row').toBeLessThan(8);
  expect(r.logoutRight).toBeLessThanOrEqual(r.width);
}

/** Named column headers are fully visible inside their scroll region without scrolling. */
async function columnsVisible(table: string, headers: string[]): Promise<void> {
  const r = await page.evaluate(([name, hs]) => {
    const t = document.querySelector(`table[aria-label="${name}"]`);
    const scroller = t?.closest('.table-wrap') ?? t?.parentElement;
    const box = (scroller ?? t)?.getBoundingClientRect();
    const ths = Array.from(t?.querySelectorAll('[role="columnheader"], th') ?? []);
    return hs.map((h) => {
      const th = ths.find((x) => x.textContent.replace(/[↕▲▼]/g, '').trim() === h);
      const b = th?.getBoundingClientRect();
      return { h, found: !!b, right: b?.right ?? 0, left: b?.left ?? 0, boxRight: box?.right ?? 0, boxLeft: box?.left ?? 0 };
    });
  }, [table, headers] as const);
  for (const c of r) {
    expect(c.found, `${table}: column ${c.h}`).toBe(true);
    expect(c.right, `${table}: column ${c.h} cut off`).toBeLessThanOrEqual(c.boxRight + 1);
    expect(c.left).toBeGreaterThanOrEqual(c.boxLeft - 1);
  }
}

// The first variant runs right after the seed and keeps the Switches page's
// default 5-minute window; later ones (the seeded 5 minutes of queue samples
// scroll out of it as the suite runs) read the same data through the 1-hour window.
const VARIANTS = [
  { width: 1280, height: 800, theme: 'light', queueWindow: '5 min' },
  { width: 1920, height: 1080, theme: 'dark', queueWindow: '1 h' },
  { width: 1280, height: 800, theme: 'dark', queueWindow: '1 h' },
  { width: 1920, height: 1080, theme: 'light', queueWindow: '1 h' },
  { width: 1440, height: 900, theme: 'light', queueWindow: '1 h' }, // a common laptop NOC screen
] as const;

/** How long ago the seed ran: an active call's window grows with its age. */
const age = () => Date.now() - seededAt;

const BOTH = ['caller → callee', 'callee → caller'];
const portSeries = (min: number, suffix = '') => PORTS.map((p) => ({ name: `port ${String(p)}${suffix}`, minValues: min }));

describe.each(VARIANTS)('every chart shows the seeded data at $width x $height, $theme', ({ width, height, theme, queueWindow }) => {
  const tag = `${String(width)}x${String(height)}-${theme}`;

  it('applies the viewport and theme', async () => {
    await page.setViewportSize({ width, height });
    await page.evaluate((t) => { localStorage.setItem('p4relay.theme', t); }, theme);
    await page.goto('/');
    await page.getByRole('heading', { name: 'Overview' }).waitFor();
    expect(await page.evaluate(() => document.documentElement.dataset.theme)).toBe(theme);
  });

  it('Overview: calls over the hour, MOS histogram, reasons; health and congestion', async () => {
    const now = Date.now();
    const hour = { from: now - 70 * MIN, to: now + 5 * MIN, maxSpanMs: 70 * MIN };
    const drawn = await chartsTrue(page, [
      { title: 'Active and offloaded calls, last hour', series: [{ name: 'active', minValues: 100 }, { name: 'offloaded', minValues: 100 }], window: hour },
      { title: 'Offload share, last hour', series: [{ name: 'offloaded share', minValues: 20 }], window: hour },
      { title: 'MOS distribution (active calls)', series: [{ name: 'calls', minValues: 18 }] },
      { title: 'Calls not offloaded, by reason', series: [{ name: 'calls on RTPProxy', minValues: 2 }] },
    ]);
    const get = (t: string, s: string) => drawn.find((d) => d.title === t)?.series.find((x) => x.name === s);
    // Every call is up now; the ended calls were up an hour ago.
    expect(get('Active and offloaded calls, last hour', 'active')?.yMax).toBe(ACTIVE_CALLS);
    expect(get('Active and offloaded calls, last hour', 'offloaded')?.yMax).toBe(ACTIVE_CALLS - ACTIVE_CALLS / 5);
    expect(get('Offload share, last hour', 'offloaded share')?.yMax).toBeLessThanOrEqual(100);
    expect(get('MOS distribution (active calls)', 'calls')?.sum).toBe(ACTIVE_CALLS);
    expect(get('Calls not offloaded, by reason', 'calls on RTPProxy')?.sum).toBe(ACTIVE_CALLS / 5);
    expect(await page.getByTestId('kpi-active').textContent()).toBe(String(ACTIVE_CALLS));
    expect(await page.getByTestId('kpi-offloaded').textContent()).toBe('80.0 %');
    // Every 9th call is impaired (MOS well under 3.6).
    expect(await page.getByTestId('kpi-under').textContent()).toMatch(new RegExp(`\\((${String(Math.floor(ACTIVE_CALLS / 9))}|${String(Math.floor(ACTIVE_CALLS / 9) + 1)}) of ${String(ACTIVE_CALLS)}\\)`));
    expect(await page.getByTestId('kpi-congestion').textContent()).toBe('1 queue');
    expect(await page.getByRole('table', { name: 'Open congestion episodes' }).textContent()).toContain(`sw1 port ${String(CONGESTED_PORT)}`);
    expect(await page.getByRole('table', { name: 'Switch health' }).textContent()).toMatch(/sw1\s*up.*1\.5 %/);
    expect(await page.getByRole('table', { name: 'Agent health' }).textContent()).toContain('relay-1');
    expect(await page.getByTestId('pct-jitter').textContent()).toMatch(/Jitter300/);
    expect(await page.getByRole('list', { name: 'Live summary' }).textContent()).toContain('1 port');
    await headerFits();
    await screenshot(page, `charts-${tag}-1-overview`);
  });

  it('Live sessions: table and header, one click from the overview', async () => {
    await page.getByRole('link', { name: 'Live sessions table →' }).click();
    await expect.poll(() => page.getByTestId('live-count').textContent(), { timeout: 10_000 }).toBe(`${String(ACTIVE_CALLS)} of ${String(ACTIVE_CALLS)} sessions`);
    await columnsVisible('Live sessions', ['Call-ID', 'Duration', 'MOS', 'Loss', 'Jitter', 'Packets']);
    await headerFits();
    await screenshot(page, `charts-${tag}-2-live`);
  });

  it('Session detail (rerouted call): quality around its samples, reroute and congestion overlaid', async () => {
    await page.getByLabel('Filter sessions').fill(callId(REROUTED));
    await page.getByRole('link', { name: callId(REROUTED) }).click();
    await page.getByRole('heading', { name: /Session/ }).waitFor();
    // Samples from 90 s before the seed until now (the call is still up), padded 3 %.
    const win = { from: seededAt - 2 * MIN, to: Date.now() + 2 * MIN, maxSpanMs: (age() + 95_000) * 1.1 };
    const quality = (title: string): ChartExpect => ({
      title, series: BOTH.map((name) => ({ name, minValues: 80 })), window: win, areas: [`sw1 port ${String(CONGESTED_PORT)} congested`],
    });
    const drawn = await chartsTrue(page, [
      quality('MOS over time'), quality('Packet loss per direction'), quality('Jitter per direction'), quality('Packets per direction'),
      { title: 'Session events timeline', series: [{ name: 'events', minValues: 2 }] },
      // The path: the primary until the reroute, the backup since, on the quality charts' window.
      {
        title: 'Call path over time',
        series: [{ name: `sw1 · ${PRIMARY_PATH}`, minValues: 2 }, { name: `sw1 · ${BACKUP_PATH}`, minValues: 2 }],
        window: win,
      },
    ]);
    expect(drawn.find((d) => d.title === 'MOS over time')?.series[0]?.markLinesX).toBeGreaterThanOrEqual(1); // the reroute
    const path = drawn.find((d) => d.title === 'Call path over time');
    const primary = path?.series.find((x) => x.name === `sw1 · ${PRIMARY_PATH}`);
    const backup = path?.series.find((x) => x.name === `sw1 · ${BACKUP_PATH}`);
    const movedAt = seededAt - REROUTE_AGO_MS;
    // The primary ends and the backup begins at the reroute (the seed's clock, within a second).
    expect(Math.abs((primary?.xMax ?? 0) - movedAt)).toBeLessThan(1500);
    expect(Math.abs((backup?.xMin ?? 0) - movedAt)).toBeLessThan(1500);
    expect(backup?.xMax ?? 0).toBeGreaterThan(movedAt + 20_000);
    expect(path?.series[0]?.markLinesX).toBe(1);
    // Loss rose while the call was degraded (4 of 50 packets caller → callee).
    expect(drawn.find((d) => d.title === 'Packet loss per direction')?.series.find((s) => s.name === 'caller → callee')?.yMax).toBeCloseTo(8, 0);
    await columnsVisible('Legs and rewrite entries', ['Direction', 'Source', 'Destination', 'Installed', 'Removed', 'Packets']);
    await headerFits();
    await screenshot(page, `charts-${tag}-3-session-rerouted`);
  });

  it('Session detail (4-second-old call): a window around its few samples, not days', async () => {
    await page.getByRole('link', { name: '← Live sessions' }).click();
    await page.getByLabel('Filter sessions').fill(callId(YOUNG));
    await page.getByRole('link', { name: callId(YOUNG) }).click();
    await page.getByRole('heading', { name: /Session/ }).waitFor();
    // Its first sample 3 s before the seed: a minute's window (more as the call ages), never days.
    const win = { from: seededAt - 20_000, to: Date.now() + 2 * MIN, maxSpanMs: Math.max(70_000, (age() + 5000) * 1.1) };
    const quality = (title: string): ChartExpect => ({ title, series: BOTH.map((name) => ({ name, minValues: 3 })), window: win });
    await chartsTrue(page, [quality('MOS over time'), quality('Packet loss per direction'), quality('Jitter per direction'), quality('Packets per direction')]);
    await columnsVisible('Legs and rewrite entries', ['Installed', 'Removed']);
    await screenshot(page, `charts-${tag}-4-session-young`);
  });

  it('Switches: depth (bytes, as the collector reads it), delay, utilisation and drops on every port', async () => {
    await page.getByRole('link', { name: 'Switches' }).click();
    await page.getByRole('heading', { name: 'Switches' }).waitFor();
    await page.getByLabel('Window').selectOption(queueWindow);
    const short = queueWindow === '5 min';
    const win = short
      ? { from: seededAt - 6 * MIN, to: Date.now() + MIN, maxSpanMs: 5.5 * MIN }
      : { from: Date.now() - 62 * MIN, to: Date.now() + MIN, maxSpanMs: 62 * MIN };
    const perPort = short ? 200 : 25; // 1 s samples, or 10 s buckets of them
    const hot = [`sw1 port ${String(CONGESTED_PORT)} congested`];
    const drawn = await chartsTrue(page, [
      { title: 'Queue depth per port', series: portSeries(perPort), window: win, areas: hot },
      { title: 'Queueing delay per port', series: portSeries(perPort), window: win, areas: hot },
      { title: 'Port utilisation', series: portSeries(perPort), window: win },
      { title: 'Drops (tail and iRED)', series: [...portSeries(perPort, ' tail'), { name: `port ${String(CONGESTED_PORT)} iRED`, minValues: 2 }], window: win },
    ]);
    // Every hop: sw1's ports beside the INT-reported hops of the second switch.
    const hopSeries = [...PORTS.map((p) => `sw1 port ${String(p)}`), ...INT_PORTS.map((p) => `${INT_SWITCH} port ${String(p)}`)]
      .map((name) => ({ name, minValues: perPort }));
    const hops = await chartsTrue(page, [
      { title: 'Queue depth per hop', series: hopSeries, window: win },
      { title: 'Queueing delay per hop', series: hopSeries, window: win },
    ]);
    const hopDepth = hops.find((d) => d.title === 'Queue depth per hop');
    // sw2's INT hops: (100 ± 60 + 20 × port) cells × 80 B, under 18 KiB; sw1's congested port far above.
    for (const p of INT_PORTS) {
      const s = hopDepth?.series.find((x) => x.name === `${INT_SWITCH} port ${String(p)}`);
      expect(s?.yMax).toBeLessThan(18);
      expect(s?.yMin).toBeGreaterThan(2);
    }
    expect(hopDepth?.series.find((x) => x.name === `sw1 port ${String(CONGESTED_PORT)}`)?.yMax).toBeGreaterThan(300);
    const hopDelay = hops.find((d) => d.title === 'Queueing delay per hop');
    expect(hopDelay?.series.find((x) => x.name === `${INT_SWITCH} port 1`)?.yMax).toBeLessThan(0.14);
    const depth = drawn.find((d) => d.title === 'Queue depth per port');
    // Port 2: 4,000-8,000 cells × 80 B while congested; the others stay under 40 KiB.
    expect(depth?.series.find((s) => s.name === `port ${String(CONGESTED_PORT)}`)?.yMax).toBeGreaterThan(300);
    expect(depth?.series.find((s) => s.name === 'port 1')?.yMax).toBeLessThan(40);
    await headerFits();
    await screenshot(page, `charts-${tag}-5-switches`);
  });

  it('Events: the timeline holds every seeded event inside its axis', async () => {
    await page.getByRole('link', { name: 'Events' }).click();
    await page.getByRole('heading', { name: 'Events' }).waitFor();
    await chartsTrue(page, [{ title: 'Events timeline', series: [{ name: 'events', minValues: 10 }], window: { from: seededAt - 10 * MIN, to: Date.now() + 2 * MIN, maxSpanMs: 10 * MIN } }]);
    await headerFits();
    await screenshot(page, `charts-${tag}-6-events`);
  });

  it('Audit: MOS, loss and jitter columns in view, sortable, filterable', async () => {
    await page.getByRole('link', { name: 'Audit' }).click();
    await page.getByRole('heading', { name: 'Audit' }).waitFor();
    await page.getByLabel('State').selectOption('ended');
    await page.getByRole('button', { name: 'Search' }).click();
    await expect.poll(() => page.getByTestId('audit-count').textContent()).toBe(`${String(ENDED_CALLS)} sessions`);
    await columnsVisible('Audit results', ['Call-ID', 'MOS mean', 'MOS min', 'Loss', 'Max jitter']);
    // Sorting by MOS: each click flips the order, and the rows follow it.
    const header = page.getByRole('columnheader', { name: /MOS mean/ });
    const mosOf = async (i: number) => parseFloat(await page.getByTestId('row').nth(i).locator('.badge').first().textContent() ?? '');
    for (let k = 0; k < 2; k++) {
      await header.getByRole('button').click();
      const dir = await header.getAttribute('aria-sort');
      expect(dir === 'ascending' || dir === 'descending').toBe(true);
      const [a, b, c] = [await mosOf(0), await mosOf(1), await mosOf(2)];
      if (dir === 'ascending') expect(a <= b && b <= c, `${String(a)}, ${String(b)}, ${String(c)}`).toBe(true);
      else expect(a >= b && b >= c, `${String(a)}, ${String(b)}, ${String(c)}`).toBe(true);
    }
    await page.getByLabel('Max jitter ≥ ms').fill('1.5');
    await page.getByRole('button', { name: 'Search' }).click();
    // Jitter 0.3 + (i % 7) × 0.2 ms: calls with i % 7 ≥ 6 reach 1.5 ms.
    const want = Array.from({ length: ENDED_CALLS }, (_, k) => ACTIVE_CALLS + 1 + k).filter((i) => i % 7 >= 6).length;
    await expect.poll(() => page.getByTestId('audit-count').textContent()).toBe(`${String(want)} session${want === 1 ? '' : 's'}`);
    await headerFits();
    await screenshot(page, `charts-${tag}-7-audit`);
    await page.getByRole('button', { name: 'Clear' }).click();
  });
});

describe('console', () => {
  it('logged no errors in the browser', () => {
    expect(consoleErrors).toEqual([]);
  });
});
