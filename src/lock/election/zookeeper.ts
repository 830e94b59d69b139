import type { Client, Stat } from 'node-zookeeper-client'
import { czxid, NO_NODE, zkCode, ZooKeeperCalls } from '../zookeeper/calls.js'
import {
  bySequence,
  createZooKeeperBackend,
  isLockNode,
  nodeName,
  rootPath,
  type ZooKeeperBackendSettings,
} from '../zookeeper/backend.js'
import { NewsLatch } from './feed.js'
import type { ElectionStore, LeaderFeed, LeaderReading } from './store.js'

/** Attempts at reading the leader's node when it goes away between listing and reading it. */
const READ_ATTEMPTS = 5

/**
 * Leader election on ZooKeeper, the recipe from ZooKeeper's docs (Curator's
 * LeaderLatch): every candidate creates an ephemeral sequential node under
 * `/<namespace>:election/<name>` (the ZooKeeper lock backend's queue, with the candidate's
 * id as the node's data), the lowest leads, and its `czxid` is the term. Observers list
 * the children with a child watch (armed once at a time: ZooKeeper watches cannot be
 * removed) and read the lowest node's data; a session expiry deletes the leader's node,
 * which the watch reports.
 * @internal
 */
export function zookeeperElection(client: Client, settings: ZooKeeperBackendSettings): ElectionStore {
  const namespace = `${settings.namespace}:election`
  const candidates = createZooKeeperBackend(client, { ...settings, namespace })
  const calls = new ZooKeeperCalls(client, settings.commandTimeoutMs)
  const parentOf = (name: string) => `${rootPath(namespace)}/${nodeName(name)}`
  const armed = new Map<NewsLatch, { children: boolean; parent: boolean }>()
  // After a reconnect the server may not have our watches (a restarted server, another one of
  // the ensemble): every observer re-reads and arms them again.
  const onConnected = () => {
    for (const [latch, watches] of armed) {
      watches.children = watches.parent = false
      latch.notify()
    }
  }
  client.on('connected', onConnected)
  return {
    candidates,
    async feed(): Promise<LeaderFeed> {
      const latch: NewsLatch = new NewsLatch(() => armed.delete(latch))
      armed.set(latch, { children: false, parent: false })
      return latch
    },
    async read(name, feed): Promise<LeaderReading> {
      const parent = parentOf(name)
      const watches = armed.get(feed as NewsLatch) ?? { children: false, parent: false }
      const notify = (which: 'children' | 'parent') => () => {
        watches[which] = false
        ;(feed as NewsLatch).notify()
      }
      for (let attempt = 1; ; attempt++) {
        const children = await calls
          .call<string[]>('list the election', (cb) =>
            watches.children
              ? client.getChildren(parent, cb as never)
              : client.getChildren(parent, notify('children'), cb as never),
          )
          .then(
            (names) => ((watches.children = true), names),
            (err: unknown) => {
              if (zkCode((err as { cause?: unknown }).cause) !== NO_NODE) throw err
              return undefined
            },
          )
        if (children === undefined) {
          // No candidate yet: watch for the path to appear.
          if (!watches.parent) {
            watches.parent = true
            await calls
              .call('watch the election path', (cb) => client.exists(parent, notify('parent'), cb as never))
              .catch((err: unknown) => {
                watches.parent = false
                throw err
              })
          }
          return { leader: undefined, recheckInMs: Infinity }
        }
        const lowest = children.filter(isLockNode).sort(bySequence)[0]
        if (lowest === undefined) return { leader: undefined, recheckInMs: Infinity }
        const node = await calls
          .call<[Buffer | undefined, Stat]>('read the leader', (cb) =>
            client.getData(`${parent}/${lowest}`, (error, data, stat) =>
              cb(error as Error | null, [data, stat] as never),
            ),
          )
          .catch((err: unknown) => {
            if (zkCode((err as { cause?: unknown }).cause) !== NO_NODE || attempt >= READ_ATTEMPTS) throw err
            return undefined
          })
        if (node)
          return {
            leader: { id: (node[0] ?? Buffer.alloc(0)).toString(), term: czxid(node[1]) },
            recheckInMs: Infinity,
          }
      }
    },
    async close() {
      client.removeListener('connected', onConnected)
      await candidates.close()
    },
  }
}
