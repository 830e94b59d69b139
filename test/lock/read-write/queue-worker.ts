/**
 * A read-write lock user in its own process, on etcd or ZooKeeper
 * (test/lock/read-write/etcd.test.ts, zookeeper.test.ts). env LOCK_BACKEND=etcd|zookeeper;
 * ETCD_HOSTS (comma-separated URLs) or ZK_CONNECT and ZK_SESSION_MS; INSIDE_DIR (the
 * shared resource: a directory).
 * Requests:
 * - { op: 'read', name, lease, wait } takes a read lock and holds it until the process
 *   dies; resolves with its token.
 * - { op: 'mix', name, rounds, writeEvery } runs `rounds` sections, every `writeEvery`-th a
 *   write, the others reads. Each section creates a file for itself in INSIDE_DIR, lists
 *   who else is inside, and removes its file; resolves with { sections, violations, maxReaders }.
 */
import { Etcd3 } from 'etcd3'
import { readdirSync, rmSync, writeFileSync } from 'node:fs'
import path from 'node:path'
import { createLocks } from '../../../src/lock/index.js'
import { sleep } from '../../support/timing.js'
import { serveRequests } from '../../support/worker-side.js'
import { connectZooKeeper } from '../../support/zookeeper.js'

const locks =
  process.env.LOCK_BACKEND === 'zookeeper'
    ? createLocks({
        zookeeper: await connectZooKeeper(process.env.ZK_CONNECT!, {
          sessionTimeout: Number(process.env.ZK_SESSION_MS ?? 2_000),
        }),
        namespace: 'rw',
      })
    : createLocks({ etcd: new Etcd3({ hosts: process.env.ETCD_HOSTS!.split(',') }), namespace: 'rw' })
const inside = process.env.INSIDE_DIR!

type Request =
  | { op: 'read'; name: string; lease: number; wait: number }
  | { op: 'mix'; name: string; rounds: number; writeEvery: number }

let sectionCount = 0
async function section(kind: 'r' | 'w'): Promise<{ violation: boolean; readers: number }> {
  const file = path.join(inside, `${kind}-${process.pid}-${++sectionCount}`)
  writeFileSync(file, '')
  const present = readdirSync(inside)
  const writers = present.filter((f) => f.startsWith('w-')).length
  const readers = present.filter((f) => f.startsWith('r-')).length
  await sleep(5)
  rmSync(file)
  return { violation: kind === 'w' ? writers + readers > 1 : writers > 0, readers }
}

serveRequests(async (request: Request) => {
  const rw = locks.readWrite(request.name)
  if (request.op === 'read') {
    const held = await rw.acquireRead({ lease: request.lease, wait: request.wait })
    return held.token.toString()
  }
  let violations = 0
  let maxReaders = 0
  for (let i = 0; i < request.rounds; i++) {
    const write = i % request.writeEvery === request.writeEvery - 1
    const seen = write
      ? await rw.write(() => section('w'), { wait: '60s' })
      : await rw.read(() => section('r'), { wait: '60s' })
    if (seen.violation) violations++
    maxReaders = Math.max(maxReaders, seen.readers)
  }
  return { sections: request.rounds, violations, maxReaders }
})
