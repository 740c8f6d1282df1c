// Benchmark: the live table with 5,000 active sessions while the server
// streams a quality sample per call per second and the operator scrolls.
// Frame intervals and long tasks are measured in Chromium; idle (no stream)
// and streaming phases run side by side in one run. Prints a table.
import { afterAll, afterEach, beforeAll, it } from 'vitest';
import { openBrowser, screenshot, type Browser } from './browser';
import { startStack, type Stack } from './harness';
import { ingest, samples, session, SWITCH } from './seed';

const CALLS = Number(process.env.P4RELAY_BENCH_CALLS ?? 5000);
const SECONDS = Number(process.env.P4RELAY_BENCH_SECONDS ?? 8);

let stack: Stack | undefined;
let browser: Browser | undefined;

beforeAll(async () => {
  stack = await startStack();
});
let failed = false;
afterEach((ctx) => {
  if (ctx.task.result?.state === 'fail') failed = true;
});

afterAll(async () => {
  if (failed) console.error(`server log (tail):\n${stack?.serverLog().slice(-4000) ?? ''}`);
  await browser?.close();
  await stack?.stop();
});

interface PhaseStats {
  frames: number; p50: number; p95: number; p99: number; max: number; longTasks: number; longMax: number;
  /** Main-thread seconds by kind (Chrome DevTools Performance metrics). */
  script: number; layout: number; style: number; task: number; wall: number;
}

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? (s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? 0) : 0;
};

it(`live table with ${String(CALLS)} sessions`, { timeout: 600_000 }, async () => {
  if (!stack) throw new Error('no stack');
  const { baseUrl, ingestToken } = stack;
  const now = Date.now();
  await ingest(baseUrl, ingestToken, { switch: { name: SWITCH, up: true, device_id: 0, ports: [] } });
  for (let k = 1; k <= CALLS; k += 1000) {
    const batch = [];
    for (let i = k; i < Math.min(k + 1000, CALLS + 1); i++) batch.push(session(i, now));
    await ingest(baseUrl, ingestToken, { sessions: batch });
  }

  browser = await openBrowser(baseUrl);
  const { page } = browser;
  const login = (await (await fetch(`${baseUrl}/api/v1/auth/login`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ username: stack.username, password: stack.password }),
  })).json()) as { access_token: string };
  await page.addInitScript((t) => { localStorage.setItem('p4relay.token', t); }, login.access_token);
  const t0 = Date.now();
  await page.goto('/');
  await page.getByTestId('live-count').filter({ hasText: `${String(CALLS)} of ${String(CALLS)} sessions` }).waitFor({ timeout: 60_000 });
  const loadMs = Date.now() - t0;

  // In-page probes: rAF frame intervals and long tasks, per phase.
  await page.evaluate(() => {
    const w = window as unknown as { __frames: number[]; __long: number[] };
    w.__frames = [];
    w.__long = [];
    let last = performance.now();
    const tick = (t: number) => { w.__frames.push(t - last); last = t; requestAnimationFrame(tick); };
    requestAnimationFrame(tick);
    new PerformanceObserver((l) => { for (const e of l.getEntries()) w.__long.push(e.duration); }).observe({ type: 'longtask' });
  });
  const cdp = await browser.context.newCDPSession(page);
  await cdp.send('Performance.enable');
  const metrics = async () => {
    const { metrics: m } = await cdp.send('Performance.getMetrics');
    const get = (n: string) => m.find((x) => x.name === n)?.value ?? 0;
    return { script: get('ScriptDuration'), layout: get('LayoutDuration'), style: get('RecalcStyleDuration'), task: get('TaskDuration'), at: Date.now() };
  };
  let before = await metrics();
  const take = async (): Promise<PhaseStats> => {
    const after = await metrics();
    const d = { script: after.script - before.script, layout: after.layout - before.layout, style: after.style - before.style, task: after.task - before.task, wall: (after.at - before.at) / 1000 };
    before = after;
    const { frames, long } = await page.evaluate(() => {
      const w = window as unknown as { __frames: number[]; __long: number[] };
      const out = { frames: w.__frames.splice(0), long: w.__long.splice(0) };
      return out;
    });
    return {
      frames: frames.length, p50: pct(frames, 50), p95: pct(frames, 95), p99: pct(frames, 99),
      max: Math.max(0, ...frames), longTasks: long.length, longMax: Math.max(0, ...long), ...d,
    };
  };
  const table = page.locator('.table-wrap.virtual');
  const scroll = async (until: () => boolean) => {
    const box = await table.boundingBox();
    if (box) await page.mouse.move(box.x + box.width / 2, box.y + box.height / 2);
    let dir = 1;
    while (!until()) {
      await page.mouse.wheel(0, dir * 600);
      await page.waitForTimeout(50);
      const top = await table.evaluate((el) => el.scrollTop / Math.max(1, el.scrollHeight - el.clientHeight));
      if (top > 0.98) dir = -1;
      if (top < 0.02) dir = 1;
    }
  };

  // Phase 1: idle scrolling (no stream).
  await take();
  const idleEnd = Date.now() + SECONDS * 1000;
  await scroll(() => Date.now() >= idleEnd);
  const idle = await take();

  // Phase 2: streaming one sample per call per second (directions alternate) while scrolling,
  // for as long as the server takes to take them all.
  let streamed = 0;
  const feed = { done: false };
  const feeder = (async () => {
    for (let s = 0; s < SECONDS; s++) {
      const tick = Date.now();
      const batch = [];
      for (let i = 1; i <= CALLS; i++) {
        const one = samples(i, tick + 1000, 1)[s % 2];
        if (one) batch.push(one);
      }
      await ingest(baseUrl, ingestToken, { samples: batch });
      streamed += batch.length;
      await new Promise((r) => setTimeout(r, Math.max(0, 1000 - (Date.now() - tick))));
    }
  })();
  const profile = process.env.P4RELAY_BENCH_PROFILE === '1';
  if (profile) {
    await cdp.send('Profiler.enable');
    await cdp.send('Profiler.setSamplingInterval', { interval: 1000 });
    await cdp.send('Profiler.start');
  }
  void feeder.finally(() => { feed.done = true; });
  await scroll(() => feed.done);
  await feeder;
  const live = await take();
  if (profile) {
    // Self time per function, top 15: where the streaming phase's main-thread time goes.
    const { profile: prof } = await cdp.send('Profiler.stop');
    const dt = new Map<number, number>();
    prof.samples?.forEach((id, k) => { dt.set(id, (dt.get(id) ?? 0) + (prof.timeDeltas?.[k] ?? 0)); });
    const self = new Map<string, number>();
    for (const n of prof.nodes) {
      const cf = n.callFrame;
      const key = `${cf.functionName || '(anon)'} ${cf.url.split('/').pop() ?? ''}:${String(cf.lineNumber)}`;
      self.set(key, (self.get(key) ?? 0) + (dt.get(n.id) ?? 0));
    }
    const top = [...self].sort((a, b) => b[1] - a[1]).slice(0, 15);
    console.log(top.map(([k, us]) => `${(us / 1000).toFixed(0).padStart(7)} ms  ${k}`).join('\n'));
  }
  const rows = await page.getByTestId('row').count();
  await screenshot(page, 'bench-live-5000');

  const heap = await page.evaluate(() => (performance as unknown as { memory?: { usedJSHeapSize: number } }).memory?.usedJSHeapSize ?? 0);
  const f = (n: number) => n.toFixed(1).padStart(8);
  const lines = [
    '',
    `webui live table: ${String(CALLS)} active sessions, ${String(SECONDS)} s per phase, scrolling throughout`,
    `initial load to "${String(CALLS)} of ${String(CALLS)}": ${String(loadMs)} ms; rows in DOM: ${String(rows)}; JS heap ${(heap / 1e6).toFixed(1)} MB; samples streamed: ${String(streamed)}`,
    '',
    `| phase              | frames | frame p50 ms | p95 ms   | p99 ms   | max ms   | long tasks | longest ms |`,
    `|--------------------|--------|--------------|----------|----------|----------|------------|------------|`,
    `| idle (no stream)   | ${String(idle.frames).padStart(6)} | ${f(idle.p50)}     | ${f(idle.p95)} | ${f(idle.p99)} | ${f(idle.max)} | ${String(idle.longTasks).padStart(10)} | ${f(idle.longMax)}   |`,
    `| streaming samples  | ${String(live.frames).padStart(6)} | ${f(live.p50)}     | ${f(live.p95)} | ${f(live.p99)} | ${f(live.max)} | ${String(live.longTasks).padStart(10)} | ${f(live.longMax)}   |`,
    '',
    `| phase              | wall s | main-thread busy | script s | layout s | style s |`,
    `|--------------------|--------|------------------|----------|----------|---------|`,
    ...([['idle (no stream)  ', idle], ['streaming samples ', live]] as const).map(([n, x]) => {
      return `| ${n} | ${x.wall.toFixed(1).padStart(6)} | ${(100 * x.task / Math.max(0.001, x.wall)).toFixed(0).padStart(14)} % | ${x.script.toFixed(2).padStart(8)} | ${x.layout.toFixed(2).padStart(8)} | ${x.style.toFixed(2).padStart(7)} |`;
    }),
    '',
    `ratio streaming/idle: frame p50 ${(live.p50 / Math.max(0.001, idle.p50)).toFixed(2)}x, p95 ${(live.p95 / Math.max(0.001, idle.p95)).toFixed(2)}x`,
    '',
  ];
  console.log(lines.join('\n'));
});
