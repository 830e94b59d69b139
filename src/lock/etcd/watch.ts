import type { IKeyValue, Watcher } from 'etcd3'

/**
 * Waits on `watcher` (cancelled when done) until a delete event that `wakes` accepts
 * ('deleted'), `ms` without one ('silent'; a failed watch too: the caller re-reads), or
 * `signal` aborts (rejects with its reason). The waits of the etcd lock and semaphore queues.
 * @internal
 */
export function untilDeleted(
  watcher: Watcher,
  ms: number,
  signal: AbortSignal,
  wakes: (previous: IKeyValue | undefined) => boolean = () => true,
): Promise<'deleted' | 'silent'> {
  return new Promise<'deleted' | 'silent'>((resolve, reject) => {
    const finish = (outcome: 'deleted' | 'silent' | Error) => {
      clearTimeout(timer)
      signal.removeEventListener('abort', onAbort)
      watcher.removeAllListeners()
      watcher.cancel().catch(() => {})
      if (outcome instanceof Error) reject(outcome)
      else resolve(outcome)
    }
    const onAbort = () => finish(signal.reason instanceof Error ? signal.reason : new Error(String(signal.reason)))
    const timer = setTimeout(() => finish('silent'), ms)
    timer.unref()
    signal.addEventListener('abort', onAbort, { once: true })
    watcher.on('delete', (_kv: IKeyValue, previous?: IKeyValue) => {
      if (wakes(previous)) finish('deleted')
    })
    watcher.on('error', () => finish('silent'))
  })
}
