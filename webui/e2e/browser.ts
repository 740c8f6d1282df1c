// Debian's Chromium driven by playwright-core: headless, no browser download,
// a fresh profile per run.
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { WEBUI } from './harness';

export const ARTIFACTS = join(WEBUI, 'test-artifacts');
const CHROMIUM = process.env.P4RELAY_CHROMIUM ?? '/usr/bin/chromium';

export interface Browser {
  context: BrowserContext;
  page: Page;
  close: () => Promise<void>;
}

export async function openBrowser(baseURL: string): Promise<Browser> {
  mkdirSync(ARTIFACTS, { recursive: true });
  const profile = mkdtempSync(join(tmpdir(), 'p4r-webui-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync',
    ],
    baseURL,
    viewport: { width: 1600, height: 1000 },
    acceptDownloads: true,
    colorScheme: 'light',
  });
  const page = context.pages()[0] ?? (await context.newPage());
  return {
    context,
    page,
    close: async () => {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

/** The whole page: the console scrolls inside <main>, so the viewport grows to fit it for the shot. */
export async function screenshot(page: Page, name: string): Promise<void> {
  const size = page.viewportSize() ?? { width: 1600, height: 1000 };
  const extra = await page.evaluate(() => {
    const main = document.querySelector('main');
    return main ? Math.max(0, main.scrollHeight - main.clientHeight) : 0;
  });
  if (extra > 0) await page.setViewportSize({ width: size.width, height: size.height + extra });
  await page.waitForTimeout(extra > 0 ? 400 : 100); // charts resize and redraw
  await page.screenshot({ path: join(ARTIFACTS, `${name}.png`) });
  if (extra > 0) await page.setViewportSize(size);
}
