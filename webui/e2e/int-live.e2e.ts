// Chart truth on live data: three real softswitches with INT on, a relayed
// call's media traced through them and the real collector feeding the real
// server (`python -m p4relay_scenarios int-live`, scenarios' int_bed.py; root,
// network namespaces intl-*). The Switches page's per-hop charts must draw the
// hops the sink reported, with the values the API serves, and the call's
// path chart the two paths INT saw (s1 to s2 directly, then around by s3)
// with the change where the path records put it.
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import type { components } from '../src/api/schema';
import { openBrowser, screenshot, type Browser } from './browser';
import { chartsTrue } from './charts';
import { ROOT, startStack, type Stack } from './harness';

type QueueSeries = components['schemas']['QueueSeries'];
type IntPathOut = components['schemas']['IntPathOut'];

// the sink's report carries its own hop's ports, so s2 has them too
const DIRECT = 's2 · s1 (1>3) > s2 (3>1)';
const AROUND = 's2 · s1 (1>4) > s3 (1>2) > s2 (4>1)';
const HOPS = ['s1 port 3', 's1 port 4', 's3 port 2'];
const CALL_ID = 'int-live@198.18.11.10';

let stack: Stack | undefined;
let browser: Browser | undefined;
let page: Page;
let bed: ChildProcessWithoutNullStreams | undefined;
let bedLog = '';
let jwt = '';
let tmp = '';
const consoleErrors: string[] = [];

function live(): Stack {
  if (!stack) throw new Error('stack not started');
  return stack;
}

async function api<T>(path: string): Promise<T> {
  const r = await fetch(`${live().baseUrl}${path}`, { headers: { Authorization: `Bearer ${jwt}` } });
  if (!r.ok) throw new Error(`${path}: ${String(r.status)} ${await r.text()}`);
  return (await r.json()) as T;
}

/** The bed's JSON lines, each step as it is announced. */
function bedSteps(proc: ChildProcessWithoutNullStreams): (key: string, timeoutMs: number) => Promise<Record<string, unknown>> {
  const seen: Record<string, unknown>[] = [];
  const waiters: (() => void)[] = [];
  createInterface({ input: proc.stdout }).on('line', (line) => {
    bedLog += `${line}\n`;
    try {
      seen.push(JSON.parse(line) as Record<string, unknown>);
    } catch {
      return; // a log line, not a step
    }
    waiters.splice(0).forEach((w) => { w(); });
  });
  proc.stderr.on('data', (b: Buffer) => { bedLog = (bedLog + b.toString()).slice(-20_000); });
  return async (key, timeoutMs) => {
    const t0 = Date.now();
    for (;;) {
      const hit = seen.find((s) => key in s);
      if (hit) return hit;
      if (proc.exitCode !== null) throw new Error(`int-live exited (${String(proc.exitCode)}) before "${key}":\n${bedLog}`);
      if (Date.now() - t0 > timeoutMs) throw new Error(`int-live: no "${key}" in ${String(timeoutMs)} ms:\n${bedLog}`);
      await new Promise<void>((r) => { waiters.push(r); setTimeout(r, 500); });
    }
  };
}

async function until<T>(what: string, get: () => Promise<T>, ok: (v: T) => boolean, timeoutMs = 20_000): Promise<T> {
  const t0 = Date.now();
  for (;;) {
    const v = await get();
    if (ok(v)) return v;
    if (Date.now() - t0 > timeoutMs) throw new Error(`${what}: not within ${String(timeoutMs)} ms: ${JSON.stringify(v).slice(0, 2000)}\n${bedLog}`);
    await new Promise((r) => setTimeout(r, 500));
  }
}

beforeAll(async () => {
  stack = await startStack();
  const login = await fetch(`${live().baseUrl}/api/v1/auth/login`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ username: live().username, password: live().password }),
  });
  jwt = ((await login.json()) as { access_token: string }).access_token;
  tmp = mkdtempSync(join(tmpdir(), 'p4r-int-live-'));
  const tokenFile = join(tmp, 'ingest.token');
  writeFileSync(tokenFile, `${live().ingestToken}\n`);
  bed = spawn('uv', [
    'run', '--frozen', '--no-sync', 'python', '-m', 'p4relay_scenarios', 'int-live',
    '--server-url', live().baseUrl, '--token-file', tokenFile, '--seconds', '150',
    '--detour-after', '4', '--run-dir', join(tmp, 'bed'),
  ], { cwd: ROOT, stdio: ['pipe', 'pipe', 'pipe'] });
  const step = bedSteps(bed);
  await step('detour', 90_000);
  // Both paths are recorded and every hop has samples before the browser looks.
  await until('two path records', () => api<IntPathOut[]>('/api/v1/paths?addr=198.18.12.10'), (p) => p.length >= 2);
  await until('samples of every hop', () => api<QueueSeries[]>('/api/v1/queues'),
    (s) => HOPS.every((h) => s.some((x) => `${x.switch} port ${String(x.dev_port)}` === h && x.points.length > 0)));
  browser = await openBrowser(live().baseUrl);
  page = browser.page;
  page.on('console', (m) => { if (m.type() === 'error') consoleErrors.push(m.text()); });
  page.on('pageerror', (e) => { consoleErrors.push(String(e)); });
  await page.goto('/login');
  await page.getByLabel('Username').fill(live().username);
  await page.getByLabel('Password').fill(live().password);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('heading', { name: 'Overview' }).waitFor();
}, 240_000);

afterAll(async () => {
  await browser?.close();
  const proc = bed;
  const alive = () => proc !== undefined && proc.exitCode === null && proc.signalCode === null;
  if (proc && alive()) {
    const exited = new Promise((r) => proc.once('exit', r));
    proc.stdin.end(); // the bed stops its media, switches and collector and removes itself
    await Promise.race([exited, new Promise((r) => setTimeout(r, 30_000))]);
    if (alive()) proc.kill('SIGTERM');
  }
  await stack?.stop();
  if (tmp) rmSync(tmp, { recursive: true, force: true });
}, 60_000);

describe('live INT data in the console', () => {
  it('Switches: the per-hop charts draw the hops the sink reported, at the values the API serves', async () => {
    await page.getByRole('link', { name: 'Switches' }).click();
    await page.getByRole('heading', { name: 'Switches' }).waitFor();
    const win = { from: Date.now() - 6 * 60_000, to: Date.now() + 60_000, maxSpanMs: 5.5 * 60_000 };
    const series = HOPS.map((name) => ({ name, minValues: 1 }));
    const drawn = await chartsTrue(page, [
      { title: 'Queue depth per hop', series, window: win },
      { title: 'Queueing delay per hop', series, window: win },
    ]);
    // What the chart drew is what the server holds for each hop (the chart
    // fetched it a moment before: its points are a prefix of the API's now).
    const served = await api<QueueSeries[]>(`/api/v1/queues?from=${encodeURIComponent(new Date(win.from).toISOString())}`);
    for (const hop of HOPS) {
      const s = served.find((x) => `${x.switch} port ${String(x.dev_port)}` === hop);
      const delays = (s?.points ?? []).flatMap((p) => (p.queue_delay_us == null ? [] : [p.queue_delay_us / 1000]));
      const drawnDelay = drawn.find((d) => d.title === 'Queueing delay per hop')?.series.find((x) => x.name === hop);
      expect(drawnDelay?.values, hop).toBeGreaterThan(0);
      expect(drawnDelay?.values, hop).toBeLessThanOrEqual(delays.length);
      // every hop held the media a while (> 0) and no drawn value exceeds the served ones
      expect(drawnDelay?.yMax ?? 0, hop).toBeGreaterThan(0);
      expect(drawnDelay?.yMax ?? Infinity, hop).toBeLessThanOrEqual(Math.max(...delays) + 1e-9);
      const depths = (s?.points ?? []).flatMap((p) => (p.depth_bytes == null ? [] : [p.depth_bytes / 1024]));
      const drawnDepth = drawn.find((d) => d.title === 'Queue depth per hop')?.series.find((x) => x.name === hop);
      expect(drawnDepth?.yMax ?? Infinity, hop).toBeLessThanOrEqual(Math.max(...depths) + 1e-9);
    }
    // only hops the media crossed: s1's and s3's other ports never carried it
    const names = drawn.find((d) => d.title === 'Queue depth per hop')?.series.map((x) => x.name) ?? [];
    expect(names.filter((n) => /^s[13] /.test(n)).sort()).toEqual([...HOPS].sort());
    await screenshot(page, 'int-live-switches');
  });

  it("Session detail: the call's path is the two paths INT reported, changing where the records say", async () => {
    const paths = await api<IntPathOut[]>('/api/v1/paths?addr=198.18.12.10');
    const changedAt = Math.max(...paths.map((p) => Date.parse(p.ts)));
    await page.getByRole('link', { name: 'Live', exact: true }).click();
    await page.getByLabel('Filter sessions').fill(CALL_ID);
    await page.getByRole('link', { name: CALL_ID }).click();
    await page.getByRole('heading', { name: /Session/ }).waitFor();
    const win = { from: Date.now() - 5 * 60_000, to: Date.now() + 60_000, maxSpanMs: 10 * 60_000 };
    const drawn = await chartsTrue(page, [{
      title: 'Call path over time',
      series: [{ name: DIRECT, minValues: 2 }, { name: AROUND, minValues: 2 }],
      window: win,
    }]);
    const chart = drawn.find((d) => d.title === 'Call path over time');
    const direct = chart?.series.find((s) => s.name === DIRECT);
    const around = chart?.series.find((s) => s.name === AROUND);
    // the direct path ends and the path around by s3 begins at the second record
    expect(direct?.xMax).toBe(changedAt);
    expect(around?.xMin).toBe(changedAt);
    expect(chart?.series[0]?.markLinesX).toBe(1);
    const table = page.getByRole('table', { name: 'Path segments' });
    expect(await table.locator('tbody tr').nth(0).textContent()).toMatch(/s2.*198\.18\.10\.1:20002 -> 198\.18\.12\.10:6000.*s1 \(1>3\) > s2.*first INT report/);
    expect(await table.locator('tbody tr').nth(1).textContent()).toMatch(/s1 \(1>4\) > s3 \(1>2\) > s2.*path change \(INT\)/);
    await screenshot(page, 'int-live-session-path');
  });

  it('logged no errors in the browser', () => {
    expect(consoleErrors).toEqual([]);
  });
});
