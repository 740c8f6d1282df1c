// Starts the real stack for the end-to-end suite, as the server's own tests
// do: a fresh database on the runner's throwaway PostgreSQL
// ($P4RELAY_TEST_DATABASE_URL), Alembic migrations, an admin made with the
// server's CLI, an ingest token, and `p4relay-server serve` serving webui/dist.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const WEBUI = join(dirname(fileURLToPath(import.meta.url)), '..');
export const ROOT = join(WEBUI, '..');
/** One file per running server, "<server pid> <owner pid>": scripts/cleanup.d/webui.sh
 * stops a server only when the run that owns it is gone (an interrupted run),
 * never one a concurrent run in the same checkout is still using. */
const PIDDIR = join(ROOT, 'build', 'webui-e2e-pids');

export interface Stack {
  baseUrl: string;
  username: string;
  password: string;
  ingestToken: string;
  serverLog: () => string;
  stop: () => Promise<void>;
}

function psqlUrl(sqlalchemyUrl: string): string {
  return sqlalchemyUrl.replace(/^postgresql\+\w+:/, 'postgresql:');
}

function run(cmd: string, args: string[], env: NodeJS.ProcessEnv, input?: string): string {
  const r = spawnSync(cmd, args, { cwd: ROOT, env, input, encoding: 'utf8', timeout: 120_000 });
  if (r.status !== 0) {
    throw new Error(`${cmd} ${args.join(' ')} failed (${String(r.status)}): ${r.stderr || r.stdout}`);
  }
  return r.stdout;
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      srv.close(() => { resolve(port); });
    });
  });
}

async function waitReady(url: string, proc: ChildProcess, log: () => string, timeoutMs = 60_000): Promise<void> {
  const t0 = Date.now();
  while (Date.now() - t0 < timeoutMs) {
    if (proc.exitCode !== null) throw new Error(`server exited (${String(proc.exitCode)}):\n${log()}`);
    try {
      const r = await fetch(`${url}/readyz`);
      if (r.ok) return;
    } catch {
      /* not listening yet */
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`server not ready after ${String(timeoutMs)} ms:\n${log()}`);
}

export async function startStack(): Promise<Stack> {
  const base = process.env.P4RELAY_TEST_DATABASE_URL;
  if (!base) {
    throw new Error('P4RELAY_TEST_DATABASE_URL is not set: run `make test STAGE=webui` (it starts a throwaway PostgreSQL)');
  }
  if (!existsSync(join(WEBUI, 'dist', 'index.html'))) {
    throw new Error('webui/dist is not built: run `npm run build` in webui first');
  }
  const dbName = `p4relay_webui_e2e_${randomBytes(4).toString('hex')}`;
  run('psql', [psqlUrl(base), '-v', 'ON_ERROR_STOP=1', '-qc', `CREATE DATABASE "${dbName}"`], process.env);
  const dbUrl = base.replace(/\/[^/?]*(\?|$)/, `/${dbName}$1`);
  const dropDb = () => {
    spawnSync('psql', [psqlUrl(base), '-qc', `DROP DATABASE IF EXISTS "${dbName}" WITH (FORCE)`], { encoding: 'utf8' });
  };

  const username = 'e2e-admin';
  const password = `pw-${randomBytes(12).toString('hex')}`;
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    P4RELAY_SERVER_DATABASE_URL: dbUrl,
    P4RELAY_SERVER_JWT_SECRET: randomBytes(32).toString('hex'),
    P4RELAY_SERVER_CONSOLE_DIR: join(WEBUI, 'dist'),
    P4RELAY_SERVER_LOG_LEVEL: 'warning',
  };
  const server = ['run', '--frozen', '--no-sync', 'p4relay-server'];
  let proc: ChildProcess | undefined;
  try {
    run('uv', [...server, 'migrate', 'upgrade', 'head'], env);
    run('uv', [...server, 'create-admin', '--username', username, '--password-stdin'], env, `${password}\n`);
    const ingestToken = run('uv', [...server, 'create-token', '--name', 'e2e-agent', '--scope', 'ingest'], env).trim();

    const port = await freePort();
    const baseUrl = `http://127.0.0.1:${String(port)}`;
    let log = '';
    const serve = spawn('uv', [...server, 'serve', '--host', '127.0.0.1', '--port', String(port)], {
      cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'],
      // Own process group: stopping it stops uv and the Python server under it.
      detached: true,
    });
    proc = serve;
    mkdirSync(PIDDIR, { recursive: true });
    const pidfile = join(PIDDIR, `${String(serve.pid)}.pid`);
    writeFileSync(pidfile, `${String(serve.pid)} ${String(process.pid)}\n`);
    const append = (b: Buffer) => { log = (log + b.toString()).slice(-20_000); };
    serve.stdout.on('data', append);
    serve.stderr.on('data', append);
    await waitReady(baseUrl, serve, () => log);

    return {
      baseUrl, username, password, ingestToken,
      serverLog: () => log,
      stop: async () => {
        const alive = () => serve.exitCode === null && serve.signalCode === null;
        if (alive() && serve.pid) {
          const exited = new Promise((r) => serve.once('exit', r));
          process.kill(-serve.pid, 'SIGTERM');
          await Promise.race([exited, new Promise((r) => setTimeout(r, 5000))]);
          if (alive()) process.kill(-serve.pid, 'SIGKILL');
        }
        rmSync(pidfile, { force: true });
        dropDb();
      },
    };
  } catch (e) {
    if (proc?.pid && proc.exitCode === null) process.kill(-proc.pid, 'SIGKILL');
    dropDb();
    throw e;
  }
}
