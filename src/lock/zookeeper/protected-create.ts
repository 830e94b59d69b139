import { CONNECTION_LOSS, EPHEMERAL_SEQUENTIAL, NO_NODE, zkCode, type ZooKeeperCalls } from './calls.js'

/** Attempts at creating the node (a parent removed by a concurrent release, a lost reply). */
const CREATE_ATTEMPTS = 4

/**
 * Creates an ephemeral sequential node `<parent>/<prefix><sequence>`, creating the parent
 * path when it is missing, and returns its path. `prefix` starts with a uuid of the
 * attempt, so when the reply is lost with the connection our node is found again by it
 * (Curator's "protected" mode) instead of staying behind as an orphan for the session. A
 * lost connection is retried only until `deadline`: a store that keeps dropping the
 * connection (an ensemble without a quorum) fails the attempt within its wait.
 * @internal
 */
export async function createProtectedNode(
  calls: ZooKeeperCalls,
  parent: string,
  prefix: string,
  deadline: number,
  data: Buffer,
): Promise<string> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await calls.create(`${parent}/${prefix}`, EPHEMERAL_SEQUENTIAL, data)
    } catch (err) {
      const code = zkCode((err as { cause?: unknown }).cause)
      if (code === CONNECTION_LOSS) {
        // The reply was lost: the node may exist. Find it by our uuid, even past the deadline
        // (a wait of 0): the caller then holds it, or removes it, never leaves it behind.
        const mine = (await calls.children(parent).catch(() => [])).find((name) => name.startsWith(prefix))
        if (mine) return `${parent}/${mine}`
      }
      if (attempt >= CREATE_ATTEMPTS || (code !== NO_NODE && code !== CONNECTION_LOSS)) throw err
      if (code === CONNECTION_LOSS && performance.now() >= deadline) throw err
      if (code === NO_NODE) {
        // A release removed the empty parent (or this is its first node).
        await calls.mkdirp(parent)
      }
    }
  }
}
