// The demo's own run: `python -m p4relay_scenarios demo --json --ipv6` (what
// `make demo ARGS=--ipv6` runs, shortened: calls for a minute, cross traffic
// from 20 s for 20 s) on the three-switch fabric with iRED, INT and reroute
// on, its own PostgreSQL and server serving this console (root, namespaces
// p4r-*): the UAC calls over IPv6, the UAC behind the NAT over IPv4, both
// families over the bottleneck. While its congestion episode runs, the console
// must show, from the demo's live data: iRED dropping on the bottleneck, every
// hop INT reported, the reroutes of the UAS's IPv4 and IPv6 prefixes (on the
// Overview and the Events page), the IPv6 calls relayed by the switch, and a
// moved IPv4 call's INT path by s3 with its MOS (INT traces IPv4 only); and
// the demo's summary lines must say what happened.
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { createInterface } from 'node:readline';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import type { components } from '../src/api/schema';
import { openBrowser, screenshot, type Browser } from './browser';
import { chartsTrue } from './charts';
import { ROOT } from './harness';

type EventOut = components['schemas']['EventOut'];
type EventPage = components['schemas']['EventPage'];
type IntPathOut = components['schemas']['IntPathOut'];
type QueueSeries = components['schemas']['QueueSeries'];
type SessionPage = components['schemas']['SessionPage'];
type SessionDetail = components['schemas']['SessionDetail'];

const UAS = '198.18.2.10';
const UAS_NET = '198.18.2.0/24';
const UAS_NET6 = 'fd00:198:18:2::/64';
const UAC_NET6 = 'fd00:198:18:1::/64';
const BOTTLENECK = 7; // s1's port towards s2
// INT hops the calls' media crosses: s1 towards s2 (direct) and towards s3, s3 towards s2
const HOPS = ['s1 port 7', 's1 port 8', 's3 port 2'];

let demo: ChildProcessWithoutNullStreams | undefined;
let demoLog = '';
let browser: Browser | undefined;
let page: Page;
let baseUrl = '';
let jwt = '';
let startedAt = '';
let reroute: EventOut | undefined; // the UAS's IPv4 subnet's move (its calls carry INT)
const consoleErrors: string[] = [];

type Step = Record<string, unknown>;
let step: (key: string, timeoutMs: number) => Promise<Step> = () => Promise.reject(new Error('demo not started'));

/** The demo's JSON lines, each step as it is announced. */
function demoSteps(proc: ChildProcessWithoutNullStreams): typeof step {
  const seen: Step[] = [];
  const waiters: (() => void)[] = [];
  createInterface({ input: proc.stdout }).on('line', (line) => {
    demoLog = (demoLog + `${line}\n`).slice(-40_000);
    try {
      seen.push(JSON.parse(line) as Step);
    } catch {
      return; // a log line, not a step
    }
    waiters.splice(0).forEach((w) => { w(); });
  });
  proc.stderr.on('data', (b: Buffer) => { demoLog = (demoLog + b.toString()).slice(-40_000); });
  return async (key, timeoutMs) => {
    const t0 = Date.now();
    for (;;) {
      const hit = seen.find((s) => key in s);
      if (hit) return hit;
      if (proc.exitCode !== null) throw new Error(`demo exited (${String(proc.exitCode)}) before "${key}":\n${demoLog}`);
      if (Date.now() - t0 > timeoutMs) throw new Error(`demo: no "${key}" in ${String(timeoutMs)} ms:\n${demoLog}`);
      await new Promise<void>((r) => { waiters.push(r); setTimeout(r, 500); });
    }
  };
}

async function api<T>(path: string): Promise<T> {
  const r = await fetch(`${baseUrl}${path}`, { headers: { Authorization: `Bearer ${jwt}` } });
  if (!r.ok) throw new Error(`${path}: ${String(r.status)} ${await r.text()}`);
  return (await r.json()) as T;
}

async function until<T>(what: string, get: () => Promise<T>, ok: (v: T) => boolean, timeoutMs: number): Promise<T> {
  const t0 = Date.now();
  for (;;) {
    const v = await get();
    if (ok(v)) return v;
    if (Date.now() - t0 > timeoutMs) throw new Error(`${what}: not within ${String(timeoutMs)} ms: ${JSON.stringify(v).slice(0, 2000)}\n${demoLog}`);
    await new Promise((r) => setTimeout(r, 1000));
  }
}

const since = () => encodeURIComponent(startedAt);
const events = async (type: string) => (await api<EventPage>(`/api/v1/events?type=${type}&since=${since()}&limit=1000`)).items;
const iredDrops = (items: readonly EventOut[]) => items
  .filter((e) => e.switch === 's1' && e.payload.dev_port === BOTTLENECK)
  .reduce((n, e) => n + (typeof e.payload.drops === 'number' ? e.payload.drops : 0), 0);

beforeAll(async () => {
  demo = spawn('uv', [
    'run', '--frozen', '--no-sync', 'python', '-m', 'p4relay_scenarios', 'demo', '--json', '--ipv6',
    '--duration', '60', '--congestion-at', '20', '--congestion-for', '20',
  ], { cwd: ROOT, stdio: ['pipe', 'pipe', 'pipe'] });
  step = demoSteps(demo);
  const ready = await step('ready', 150_000);
  baseUrl = String(ready.console).replace(/\/$/, '');
  startedAt = String(ready.started_at);
  const login = await fetch(`${baseUrl}/api/v1/auth/login`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ username: ready.user, password: ready.password }),
  });
  jwt = ((await login.json()) as { access_token: string }).access_token;
  await step('congestion', 60_000);
  // The switches acted before the browser looks: the reroute, iRED's drops, every hop's INT samples.
  const away = (e: EventOut, flow: string) => e.payload.direction === 'to_backup' && e.payload.flow === flow;
  const moved = await until('the reroutes of both UAS prefixes to the backup', () => events('reroute'),
    (items) => items.some((e) => away(e, UAS_NET)) && items.some((e) => away(e, UAS_NET6)), 40_000);
  reroute = moved.find((e) => away(e, UAS_NET));
  await until('iRED drops on the bottleneck', () => events('ired_drop'), (items) => iredDrops(items) > 0, 40_000);
  await until('INT samples of every hop', () => api<QueueSeries[]>(`/api/v1/queues?from=${since()}`),
    (s) => HOPS.every((h) => s.some((x) => `${x.switch} port ${String(x.dev_port)}` === h && x.points.length > 0)), 40_000);
  await until('an INT path by s3', () => api<IntPathOut[]>(`/api/v1/paths?addr=${UAS}&since=${since()}`),
    (p) => p.some((r) => r.hops.some((h) => h.switch === 's3')), 40_000);
  browser = await openBrowser(baseUrl);
  page = browser.page;
  page.on('console', (m) => { if (m.type() === 'error') consoleErrors.push(m.text()); });
  page.on('pageerror', (e) => { consoleErrors.push(String(e)); });
  await page.goto('/login');
  await page.getByLabel('Username').fill(String(ready.user));
  await page.getByLabel('Password').fill(String(ready.password));
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('heading', { name: 'Overview' }).waitFor();
}, 330_000);

afterAll(async () => {
  await browser?.close();
  const proc = demo;
  const alive = () => proc !== undefined && proc.exitCode === null && proc.signalCode === null;
  if (proc && alive()) {
    const exited = new Promise((r) => proc.once('exit', r));
    proc.stdin.end(); // the demo ends its calls, sums up and tears its testbed down
    await Promise.race([exited, new Promise((r) => setTimeout(r, 90_000))]);
    if (alive()) proc.kill('SIGTERM');
  }
}, 120_000);

describe("the demo's congestion episode in the console", () => {
  it("Overview: the reroute and iRED's drops on the bottleneck at a glance", async () => {
    const card = page.getByRole('region', { name: 'Congestion control' });
    await card.getByRole('table', { name: 'Recent reroutes' }).locator('tbody tr[data-direction="to_backup"]').first()
      .waitFor({ timeout: 20_000 });
    const ired = card.getByRole('table', { name: 'iRED per port' }).getByRole('row', { name: new RegExp(`^s1 port ${String(BOTTLENECK)} `) });
    await ired.waitFor({ timeout: 20_000 });
    const dropped = Number(((await ired.locator('td').nth(1).textContent()) ?? '').replace(/\D/g, ''));
    expect(dropped).toBeGreaterThan(0);
    await screenshot(page, 'demo-overview');
  });

  it('Switches: iRED drops on the bottleneck and the queue of every hop INT reported', async () => {
    await page.getByRole('link', { name: 'Switches' }).click();
    await page.getByRole('heading', { name: 'Switches' }).waitFor();
    // the label's name carries the selected switch: "Switch s1"
    await page.getByRole('combobox', { name: /^Switch\b/ }).selectOption({ label: 's1' });
    const win = { from: Date.now() - 6 * 60_000, to: Date.now() + 60_000, maxSpanMs: 5.5 * 60_000 };
    const hops = HOPS.map((name) => ({ name, minValues: 1 }));
    const drawn = await chartsTrue(page, [
      { title: 'Drops (tail and iRED)', series: [{ name: `port ${String(BOTTLENECK)} iRED`, minValues: 1 }], window: win },
      { title: 'Queue depth per hop', series: hops, window: win },
      { title: 'Queueing delay per hop', series: hops, window: win },
    ]);
    // iRED dropped something on the bottleneck, as its events say
    const ired = drawn.find((d) => d.title === 'Drops (tail and iRED)')?.series.find((s) => s.name === `port ${String(BOTTLENECK)} iRED`);
    expect(ired?.yMax ?? 0).toBeGreaterThan(0);
    // the bottleneck's hop queued the media during the episode
    const delay = drawn.find((d) => d.title === 'Queueing delay per hop')?.series.find((s) => s.name === 's1 port 7');
    expect(delay?.yMax ?? 0).toBeGreaterThan(0);
    await screenshot(page, 'demo-switches');
  });

  it("Events: the reroutes of the calls' IPv4 and IPv6 prefixes to the backup by s3", async () => {
    await page.getByRole('link', { name: 'Events' }).click();
    await page.getByRole('heading', { name: 'Events' }).waitFor();
    const away = page.getByRole('table', { name: 'Reroutes' }).locator('tbody tr[data-direction="to_backup"]');
    for (const flow of [UAS_NET, UAS_NET6]) {
      const row = away.filter({ hasText: flow }).first();
      await row.waitFor({ timeout: 20_000 });
      const text = await row.textContent();
      expect(text).toMatch(/s1/);
      expect(text).toMatch(/to backup/);
    }
    await screenshot(page, 'demo-events');
  });

  it('Live: the IPv6 calls by their prefix, relayed by the switch', async () => {
    await page.getByRole('link', { name: 'Live', exact: true }).click();
    await page.getByRole('heading', { name: 'Live sessions' }).waitFor();
    const count = page.getByTestId('live-count');
    const shown = async () => Number(/^(\d+) of/.exec((await count.textContent()) ?? '')?.[1] ?? -1);
    // calls come and go (and are on RTPProxy until answered): the relayed ones by the UAC's prefix
    await page.getByLabel('Filter sessions').fill(UAC_NET6);
    await page.getByRole('combobox', { name: 'Relayed by' }).selectOption('switch');
    await expect.poll(shown, { timeout: 20_000 }).toBeGreaterThan(0);
    const row = page.getByTestId('row').first();
    expect(await row.textContent()).toContain('[fd00:198:18:1::10]:');
    await screenshot(page, 'demo-live-ipv6');
    await page.getByRole('combobox', { name: 'Relayed by' }).selectOption('all');
    await page.getByLabel('Filter sessions').fill('');
  });

  it("Session detail: a moved call's INT path goes by s3 and its MOS held", async () => {
    if (!reroute) throw new Error('no reroute');
    const at = Date.parse(reroute.ts);
    const list = await api<SessionPage>(`/api/v1/sessions?limit=500&started_from=${since()}&offloaded=true`);
    const candidates = list.items.filter((s) => Date.parse(s.started_at) <= at && (s.ended_at == null || Date.parse(s.ended_at) >= at));
    let moved: SessionDetail | undefined;
    for (const s of candidates) {
      const d = await api<SessionDetail>(`/api/v1/sessions/${String(s.id)}`);
      if (d.reroutes.some((e) => e.id === reroute?.id) && d.path.some((p) => p.path.includes('s3'))) { moved = d; break; }
    }
    expect(moved, `a call up at the reroute whose path INT traced by s3 (of ${String(candidates.length)})`).toBeDefined();
    if (!moved) return;
    await page.goto(`/sessions/${String(moved.id)}`);
    await page.getByRole('heading', { name: /Session/ }).waitFor();
    const segments = page.getByRole('table', { name: 'Path segments' });
    await segments.waitFor();
    await expect.poll(async () => segments.locator('tbody').textContent(), { timeout: 20_000 })
      .toMatch(/s1 \(\d+>8\) > s3 \(1>2\) > s2/);
    expect(await page.getByRole('list', { name: 'Reroutes of this call' }).textContent()).toMatch(/moved off port 7|to backup|198\.18\.2\.0\/24/);
    await chartsTrue(page, [{ title: 'Call path over time', series: [{ name: /s3/, minValues: 1 }] }]);
    // its MOS held over the call (the reroute costs it a moment, not the episode)
    expect(moved.mos_avg ?? 0).toBeGreaterThanOrEqual(3.6);
    await screenshot(page, 'demo-session-path');
  });

  it('logged no errors in the browser', () => {
    expect(consoleErrors).toEqual([]);
  });

  it("the demo's summary line says what happened, from its live data", async () => {
    demo?.stdin.end(); // ends the calls early, as Ctrl-C does
    const s = await step('summary', 120_000);
    const line = String(s.summary);
    console.log(`demo summary: ${line}`);
    expect(line).toMatch(/^congestion on s1→s2 at \d+ s: \d+ calls moved to s1→s3→s2 in \d+ ms, their MOS \d\.\d \(median\)/);
    expect(Number(s.moved_calls)).toBeGreaterThan(0);
    expect(Number(s.ired_drops)).toBeGreaterThan(0);
    expect(Number(s.sessions)).toBeGreaterThanOrEqual(Number(s.moved_calls));
    const v6 = String((await step('summary_ipv6', 10_000)).summary_ipv6);
    console.log(`demo summary (IPv6): ${v6}`);
    expect(v6).toMatch(/^over IPv6: \d+ sessions, \d+ offloaded, MOS \d\.\d \(mean\).*, fd00:198:18:2::\/64 moved to s1→s3→s2 in \d+ ms(, back after \d+ s)?$/);
    await step('done', 90_000);
  }, 240_000);
});
