// Fails the build when the initial JavaScript (the entry chunk and every chunk
// it statically imports) exceeds the gzipped budget. Lazy pages don't count:
// they load on navigation.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';

const BUDGET = 300 * 1024;
const dist = new URL('../dist/', import.meta.url).pathname;
const manifest = JSON.parse(readFileSync(join(dist, '.vite/manifest.json'), 'utf8'));

const entry = Object.values(manifest).find((c) => c.isEntry);
if (!entry) throw new Error('check-bundle: no entry chunk in dist/.vite/manifest.json');

const seen = new Set();
const walk = (key) => {
  const chunk = manifest[key];
  if (!chunk || seen.has(chunk.file)) return;
  seen.add(chunk.file);
  for (const dep of chunk.imports ?? []) walk(dep);
};
walk(Object.keys(manifest).find((k) => manifest[k] === entry));

let total = 0;
const rows = [];
for (const file of seen) {
  const gz = gzipSync(readFileSync(join(dist, file)), { level: 9 }).length;
  total += gz;
  rows.push([file, gz]);
}
let lazy = 0;
for (const c of Object.values(manifest)) {
  if (!seen.has(c.file) && c.file.endsWith('.js')) lazy += gzipSync(readFileSync(join(dist, c.file)), { level: 9 }).length;
}
const kb = (n) => `${(n / 1024).toFixed(1)} kB`;
for (const [f, gz] of rows) console.log(`  initial  ${kb(gz).padStart(9)}  ${f}`);
console.log(`check-bundle: initial JS ${kb(total)} gzipped (budget ${kb(BUDGET)}); lazy chunks ${kb(lazy)} gzipped`);
if (total > BUDGET) {
  console.error(`check-bundle: FAIL — initial JS is ${kb(total - BUDGET)} over budget`);
  process.exit(1);
}
