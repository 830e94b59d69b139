/**
 * A real PgBouncer for tests, in front of the machine's PostgreSQL (127.0.0.1:5432):
 * started from /usr/sbin/pgbouncer (or PGBOUNCER_BIN) on a free loopback port with a temp
 * config (auth trust, every database passed through, the pool mode and pool size the
 * test asks for), tracked and stopped by pid (./managed-process.ts). When the binary is
 * missing, its suites are skipped with the reason, or fail under CI=true.
 */
import { chmodSync, writeFileSync } from 'node:fs'
import path from 'node:path'
import { findExecutable, freePort, HOST, ManagedProcess, reportMissing, tmpDir } from './managed-process.js'
import { POSTGRES, tcpOpen } from './databases.js'

const START_TIMEOUT_MS = 15_000

export const pgbouncerBinary: string | undefined =
  process.env.PGBOUNCER_BIN ?? findExecutable('pgbouncer', ['/usr/sbin', '/usr/bin', '/usr/local/bin'])
export const pgbouncerAvailable = pgbouncerBinary !== undefined
if (!pgbouncerAvailable) reportMissing('pgbouncer (or PGBOUNCER_BIN)', 'apt-get install pgbouncer')

export interface PgBouncer {
  readonly port: number
  readonly pid: number
  stop(): Promise<void>
}

export interface StartPgBouncerOptions {
  /** Default `'transaction'`. */
  poolMode?: 'transaction' | 'session' | 'statement'
  /** Server connections per database/user pair. Default 2. */
  poolSize?: number
}

export async function startPgBouncer(options: StartPgBouncerOptions = {}): Promise<PgBouncer> {
  if (!pgbouncerBinary)
    throw new Error('pgbouncer is not installed; guard the suite with describe.skipIf(!pgbouncerAvailable)')
  const port = await freePort()
  const dir = tmpDir('pgbouncer')
  const users = path.join(dir, 'users.txt')
  const config = path.join(dir, 'pgbouncer.ini')
  writeFileSync(users, `"${POSTGRES.user}" ""\n`)
  writeFileSync(
    config,
    [
      '[databases]',
      `* = host=${POSTGRES.host} port=${POSTGRES.port}`,
      '[pgbouncer]',
      `listen_addr = ${HOST}`,
      `listen_port = ${port}`,
      'unix_socket_dir =',
      'auth_type = trust',
      `auth_file = ${users}`,
      `pool_mode = ${options.poolMode ?? 'transaction'}`,
      `default_pool_size = ${options.poolSize ?? 2}`,
      'max_client_conn = 200',
      'ignore_startup_parameters = extra_float_digits,options',
      '',
    ].join('\n'),
  )
  // pgbouncer will not run as root; it drops to the postgres user, who must read the config.
  const asRoot = process.getuid?.() === 0
  if (asRoot)
    for (const file of [path.dirname(dir), dir, users, config])
      chmodSync(file, file === users || file === config ? 0o644 : 0o755)
  const server = new ManagedProcess({
    label: `pgbouncer :${port}`,
    command: pgbouncerBinary,
    args: [...(asRoot ? ['-u', 'postgres'] : []), config],
    logFile: path.join(dir, 'pgbouncer.log'),
  })
  server.spawn()
  await server.waitReady(() => tcpOpen(port), START_TIMEOUT_MS)
  return {
    port,
    get pid() {
      return server.pid
    },
    stop: () => server.stop(),
  }
}
