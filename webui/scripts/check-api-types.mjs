// Fails when src/api/schema.d.ts is not what `npm run gen:api` makes from the
// server's current OpenAPI: server/openapi.json when committed, else the
// document the server's CLI prints (`p4relay-server openapi`).
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const webui = new URL('..', import.meta.url).pathname;
const root = join(webui, '..');
const tmp = mkdtempSync(join(tmpdir(), 'p4r-api-'));
try {
  let source = join(root, 'server', 'openapi.json');
  if (!existsSync(source)) {
    source = join(tmp, 'openapi.json');
    execFileSync('uv', ['run', '--frozen', '--no-sync', 'p4relay-server', 'openapi', '-o', source], {
      cwd: root, stdio: ['ignore', 'ignore', 'inherit'], env: { ...process.env, P4RELAY_LOG_LEVEL: 'error' },
    });
  }
  const out = join(tmp, 'schema.d.ts');
  execFileSync(join(webui, 'node_modules', '.bin', 'openapi-typescript'), [source, '-o', out], { stdio: 'ignore' });
  const fresh = readFileSync(out, 'utf8');
  const committed = readFileSync(join(webui, 'src', 'api', 'schema.d.ts'), 'utf8');
  if (fresh !== committed) {
    console.error(`check:api: src/api/schema.d.ts is stale against ${source.startsWith(tmp) ? 'the server CLI' : 'server/openapi.json'}; run \`npm run gen:api\` and fix what tsc reports`);
    process.exit(1);
  }
  console.log('check:api: src/api/schema.d.ts matches the server OpenAPI');
} finally {
  rmSync(tmp, { recursive: true, force: true });
}
