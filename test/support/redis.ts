/**
 * Real, throwaway redis-server processes for tests (no mocks).
 *
 * Every server is started by us on a free 127.0.0.1 port with its own temp dir, is
 * tracked by pid, and is killed by pid: on stop(), on process exit (synchronously), on
 * SIGINT/SIGTERM/SIGHUP, and — where util-linux `setpriv` exists — by the kernel via
 * PR_SET_PDEATHSIG if the test process dies without running any handler (e.g. SIGKILL).
 * Nothing here ever connects to a Redis it did not start (the machine's 6379 included).
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { accessSync, constants, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Cluster, Redis, type ClusterOptions, type RedisOptions } from 'ioredis';

const HOST = '127.0.0.1' as const;
const READY_TIMEOUT_MS = 10_000;
const STOP_TIMEOUT_MS = 10_000;
const KILL_TIMEOUT_MS = 5_000;
const CLUSTER_READY_TIMEOUT_MS = 30_000;
const SLOTS = 16384;

function findExecutable(name: string, extra: string[]): string | undefined {
  const dirs = [...(process.env.PATH ?? '').split(path.delimiter).filter(Boolean), ...extra];
  for (const dir of dirs) {
    const candidate = path.join(dir, name);
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      /* not here */
    }
  }
  return undefined;
}

/** Resolved redis-server path (REDIS_SERVER_BIN overrides the PATH lookup), or undefined. */
export const redisServerBinary: string | undefined = (() => {
  const override = process.env.REDIS_SERVER_BIN;
  if (override) {
    try {
      accessSync(override, constants.X_OK);
      return override;
    } catch {
      return undefined;
    }
  }
  return findExecutable('redis-server', ['/usr/bin', '/usr/local/bin', '/usr/sbin']);
})();

/** Use as `describe.skipIf(!redisAvailable)`; the reason is printed once per test process. */
export const redisAvailable: boolean = redisServerBinary !== undefined;
if (!redisAvailable) {
  console.warn(
    '[test/support/redis] redis-server not found on PATH (or REDIS_SERVER_BIN): ' +
      'Redis-backed tests are SKIPPED. Install it (apt-get install redis-server) to run them.',
  );
}

/** `setpriv --pdeathsig KILL` makes the kernel kill redis if this process dies uncleanly. */
const setprivBinary = (() => {
  const bin = findExecutable('setpriv', ['/usr/bin', '/bin']);
  if (!bin) return undefined;
  const probe = spawnSync(bin, ['--pdeathsig', 'KILL', '--', 'true'], { stdio: 'ignore', timeout: 5_000 });
  return probe.status === 0 ? bin : undefined;
})();

// ---------------------------------------------------------------- tracking & cleanup

/** pids of every redis-server we started and that has not exited yet. */
const livePids = new Set<number>();
/** Ports handed out in this process; never reused, so a stopped server's port stays ours. */
const reservedPorts = new Set<number>();
const allServers = new Set<ManagedRedis>();
let rootDir: string | undefined;

const TMP_PREFIX = 'stampede-guard-redis-';

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** One dir per test process, named by pid so dirs left by a SIGKILLed process can be swept. */
function tmpRoot(): string {
  if (!rootDir) {
    for (const name of readdirSync(os.tmpdir())) {
      const owner = name.startsWith(TMP_PREFIX) ? /^(\d+)-/.exec(name.slice(TMP_PREFIX.length)) : null;
      if (owner && !pidAlive(Number(owner[1]))) rmSync(path.join(os.tmpdir(), name), { recursive: true, force: true });
    }
    rootDir = mkdtempSync(path.join(os.tmpdir(), `${TMP_PREFIX}${process.pid}-`));
  }
  return rootDir;
}

function killAllSync(): void {
  for (const pid of livePids) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      /* already gone */
    }
  }
  livePids.clear();
  if (rootDir) rmSync(rootDir, { recursive: true, force: true });
}

process.on('exit', killAllSync);
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
  process.once(signal, () => {
    killAllSync();
    // Keep the default "die on signal" behaviour unless someone else handles it.
    if (process.listenerCount(signal) === 0) process.kill(process.pid, signal);
  });
}

// ---------------------------------------------------------------- small helpers

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Resolves true if `promise` settled within `ms`. */
async function within(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<false>((r) => (timer = setTimeout(() => r(false), ms)));
  try {
    return await Promise.race([promise.then(() => true), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

function canListen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = net.createServer();
    srv.once('error', () => resolve(false));
    srv.listen({ host: HOST, port, exclusive: true }, () => srv.close(() => resolve(true)));
  });
}

/** Kernel-assigned free port (bind :0, close). Cluster nodes also need port+10000 (the bus). */
async function freePort(needBusPort: boolean): Promise<number> {
  for (let attempt = 0; attempt < 100; attempt++) {
    const port = await new Promise<number>((resolve, reject) => {
      const srv = net.createServer();
      srv.once('error', reject);
      srv.listen({ host: HOST, port: 0, exclusive: true }, () => {
        const { port } = srv.address() as net.AddressInfo;
        srv.close(() => resolve(port));
      });
    });
    if (reservedPorts.has(port)) continue;
    if (needBusPort && (port + 10000 > 65535 || !(await canListen(port + 10000)))) continue;
    reservedPorts.add(port);
    return port;
  }
  throw new Error('could not find a free 127.0.0.1 port');
}

/** Raw RESP PING, so readiness checks never involve ioredis reconnect logic. */
function ping(port: number, timeoutMs = 500): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: HOST, port });
    let buf = '';
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.once('error', () => done(false));
    socket.once('connect', () => socket.write('PING\r\n'));
    socket.on('data', (d) => {
      buf += d.toString('latin1');
      if (buf.includes('\r\n')) done(buf.startsWith('+PONG'));
    });
  });
}

// ---------------------------------------------------------------- servers

export interface RedisServer {
  readonly host: '127.0.0.1';
  readonly port: number;
  readonly url: string;
  /** pid of the current process (changes after restart()). */
  readonly pid: number;
  /** New ioredis client to this server; tracked and disconnected on stop(). */
  client(options?: RedisOptions): Redis;
  /** Graceful: disconnect tracked clients, SIGTERM by pid, wait (bounded, then SIGKILL). */
  stop(): Promise<void>;
  /** Crash: SIGKILL by pid and wait for exit. Clients are left connected (they see the outage). */
  kill(): Promise<void>;
  /** SIGSTOP: the server hangs (TCP still accepts, nothing answers). */
  pause(): void;
  /** SIGCONT. */
  resume(): void;
  /** Start again on the SAME port after stop()/kill() (new pid); resolves once PING answers. */
  restart(): Promise<void>;
}

export interface StartRedisOptions {
  /** Extra redis-server arguments, appended after the defaults (so they win). */
  args?: string[];
}

class ManagedRedis implements RedisServer {
  readonly host = HOST;
  readonly url: string;
  private child: ChildProcess | undefined;
  private exited: Promise<void> = Promise.resolve();
  private readonly clients = new Set<Redis>();
  private paused = false;

  constructor(
    readonly port: number,
    private readonly dir: string,
    private readonly argv: string[],
  ) {
    this.url = `redis://${HOST}:${port}`;
  }

  get pid(): number {
    return this.child?.pid ?? -1;
  }

  get running(): boolean {
    return this.child !== undefined;
  }

  private get logFile(): string {
    return path.join(this.dir, 'redis.log');
  }

  logTail(lines = 15): string {
    try {
      return readFileSync(this.logFile, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
    } catch {
      return '(no log)';
    }
  }

  /** Spawn and wait for PING; throws (with the log tail) if it exits or does not answer in time. */
  async spawnAndWait(): Promise<void> {
    if (this.child) throw new Error(`redis on port ${this.port} is already running (pid ${this.pid})`);
    const argv = [...this.argv, '--logfile', this.logFile];
    const child = setprivBinary
      ? spawn(setprivBinary, ['--pdeathsig', 'KILL', '--', redisServerBinary!, ...argv], { stdio: 'ignore' })
      : spawn(redisServerBinary!, argv, { stdio: 'ignore' });
    let exitedFlag = false;
    this.exited = new Promise<void>((resolve) => {
      child.once('exit', () => {
        exitedFlag = true;
        if (child.pid !== undefined) livePids.delete(child.pid);
        if (this.child === child) {
          this.child = undefined;
          this.paused = false;
        }
        resolve();
      });
    });
    // A failed spawn emits 'error' (no pid, maybe no 'exit'); the pid check below reports it.
    child.once('error', () => {});
    if (child.pid === undefined) throw new Error(`failed to spawn ${redisServerBinary}`);
    livePids.add(child.pid);
    this.child = child;

    const deadline = Date.now() + READY_TIMEOUT_MS;
    while (Date.now() < deadline) {
      if (exitedFlag) throw new RedisStartError(this.port, this.logTail());
      if (await ping(this.port)) return;
      await sleep(50);
    }
    await this.kill();
    throw new Error(`redis on port ${this.port} did not answer PING within ${READY_TIMEOUT_MS} ms\n${this.logTail()}`);
  }

  client(options?: RedisOptions): Redis {
    const client = new Redis({ host: HOST, port: this.port, ...options });
    this.clients.add(client);
    client.once('end', () => this.clients.delete(client));
    return client;
  }

  async stop(): Promise<void> {
    for (const c of this.clients) c.disconnect();
    this.clients.clear();
    const child = this.child;
    if (!child) return;
    this.resume(); // a SIGSTOPped process would never act on SIGTERM
    this.signal('SIGTERM');
    if (!(await within(this.exited, STOP_TIMEOUT_MS))) await this.kill();
  }

  async kill(): Promise<void> {
    if (!this.child) return;
    this.signal('SIGKILL');
    if (!(await within(this.exited, KILL_TIMEOUT_MS))) {
      throw new Error(`redis pid ${this.pid} did not exit within ${KILL_TIMEOUT_MS} ms of SIGKILL`);
    }
  }

  pause(): void {
    this.signal('SIGSTOP');
    this.paused = true;
  }

  resume(): void {
    if (!this.paused) return;
    this.signal('SIGCONT');
    this.paused = false;
  }

  async restart(): Promise<void> {
    // The port may linger briefly (e.g. another process's transient use): retry, bounded.
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.spawnAndWait();
      } catch (err) {
        if (!(err instanceof RedisStartError && err.addressInUse) || attempt >= 10) throw err;
        await sleep(200);
      }
    }
  }

  private signal(sig: NodeJS.Signals): void {
    const pid = this.child?.pid;
    if (pid === undefined) return;
    try {
      process.kill(pid, sig);
    } catch {
      /* exited meanwhile */
    }
  }
}

class RedisStartError extends Error {
  readonly addressInUse: boolean;
  constructor(port: number, log: string) {
    super(`redis-server on port ${port} exited during startup:\n${log}`);
    this.addressInUse = /address already in use/i.test(log);
  }
}

function requireBinary(): void {
  if (!redisServerBinary) {
    throw new Error('redis-server is not installed; guard the suite with describe.skipIf(!redisAvailable)');
  }
}

async function startManaged(args: string[], cluster: boolean): Promise<ManagedRedis> {
  requireBinary();
  for (let attempt = 1; ; attempt++) {
    const port = await freePort(cluster);
    const dir = path.join(tmpRoot(), String(port));
    mkdirSync(dir, { recursive: true });
    const argv = [
      '--port', String(port), '--bind', HOST, '--save', '', '--appendonly', 'no',
      '--daemonize', 'no', '--dir', dir, '--enable-debug-command', 'yes',
      ...(cluster ? ['--cluster-enabled', 'yes', '--cluster-config-file', path.join(dir, `nodes-${port}.conf`)] : []),
      ...args,
    ];
    const server = new ManagedRedis(port, dir, argv);
    try {
      await server.spawnAndWait();
      allServers.add(server);
      return server;
    } catch (err) {
      // Someone grabbed the port between our probe and redis' bind: pick another.
      if (err instanceof RedisStartError && err.addressInUse && attempt < 5) continue;
      throw err;
    }
  }
}

/** Start a standalone redis-server on a fresh loopback port; resolves once it answers PING. */
export async function startRedis(options: StartRedisOptions = {}): Promise<RedisServer> {
  return startManaged(options.args ?? [], false);
}

/** Stop every server this process started (handy in a global afterAll). */
export async function stopAllRedis(): Promise<void> {
  await Promise.all([...allServers].map((s) => s.stop()));
}

// ---------------------------------------------------------------- cluster

export interface RedisClusterHandle {
  nodes: RedisServer[];
  startupNodes: { host: string; port: number }[];
  /** New ioredis Cluster client; tracked and disconnected on stop(). */
  client(options?: ClusterOptions): Cluster;
  stop(): Promise<void>;
}

export interface StartClusterOptions {
  /** Number of masters (no replicas); default 3. */
  masters?: number;
  /** Extra redis-server arguments for every node. */
  args?: string[];
}

function parseInfo(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of text.split('\r\n')) {
    const i = line.indexOf(':');
    if (i > 0) out[line.slice(0, i)] = line.slice(i + 1);
  }
  return out;
}

/**
 * A local N-master Redis Cluster: slots split evenly with CLUSTER ADDSLOTSRANGE, nodes joined
 * with CLUSTER MEET, then we wait (bounded) until every node reports cluster_state:ok, all
 * slots assigned and all N nodes known — only then is a Cluster client's view stable.
 */
export async function startCluster(options: StartClusterOptions = {}): Promise<RedisClusterHandle> {
  const masters = options.masters ?? 3;
  if (!Number.isInteger(masters) || masters < 1) throw new Error(`masters must be >= 1, got ${masters}`);
  const nodes: ManagedRedis[] = [];
  const clients = new Set<Cluster>();
  const stop = async () => {
    for (const c of clients) c.disconnect();
    clients.clear();
    await Promise.all(nodes.map((n) => n.stop()));
  };
  const admins: Redis[] = [];
  try {
    nodes.push(...(await Promise.all(Array.from({ length: masters }, () => startManaged(options.args ?? [], true)))));
    admins.push(...nodes.map((n) => n.client({ maxRetriesPerRequest: 1 })));
    await Promise.all(
      admins.map((admin, i) => {
        const from = Math.floor((i * SLOTS) / masters);
        const to = Math.floor(((i + 1) * SLOTS) / masters) - 1;
        return admin.call('CLUSTER', 'ADDSLOTSRANGE', String(from), String(to));
      }),
    );
    await Promise.all(nodes.slice(1).map((n) => admins[0]!.call('CLUSTER', 'MEET', HOST, String(n.port))));

    const deadline = Date.now() + CLUSTER_READY_TIMEOUT_MS;
    let last: Record<string, string>[] = [];
    for (;;) {
      last = await Promise.all(admins.map(async (a) => parseInfo(String(await a.call('CLUSTER', 'INFO')))));
      const ready = last.every(
        (info) =>
          info.cluster_state === 'ok' &&
          info.cluster_slots_assigned === String(SLOTS) &&
          info.cluster_known_nodes === String(masters),
      );
      if (ready) break;
      if (Date.now() > deadline) {
        throw new Error(`cluster not ready within ${CLUSTER_READY_TIMEOUT_MS} ms: ${JSON.stringify(last)}`);
      }
      await sleep(100);
    }
  } catch (err) {
    await stop();
    throw err;
  } finally {
    for (const a of admins) a.disconnect();
  }

  const startupNodes = nodes.map((n) => ({ host: HOST as string, port: n.port }));
  return {
    nodes,
    startupNodes,
    client(clusterOptions?: ClusterOptions): Cluster {
      const c = new Cluster(startupNodes, clusterOptions);
      clients.add(c);
      c.once('end', () => clients.delete(c));
      return c;
    },
    stop,
  };
}
