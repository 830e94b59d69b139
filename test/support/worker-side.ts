/**
 * Worker side of test/support/workers.ts. A worker module does its setup, then calls
 * serveRequests(handler): requests `{id, message}` are answered with `{id, ok, value|error}`,
 * and 'ready' is sent so forkWorker() knows setup is done.
 *
 * The worker exits when the IPC channel closes, so a parent that dies (even by SIGKILL)
 * never leaves orphaned workers behind.
 */

export interface SerializedError {
  name: string
  message: string
  stack?: string
  code?: unknown
}

export type WorkerReply = { id: number; ok: true; value: unknown } | { id: number; ok: false; error: SerializedError }

export function serializeError(err: unknown): SerializedError {
  if (err instanceof Error) {
    return { name: err.name, message: err.message, stack: err.stack, code: (err as { code?: unknown }).code }
  }
  return { name: 'Error', message: String(err) }
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- each worker declares its own message shape
export function serveRequests(handler: (message: any) => Promise<unknown>): void {
  const send = process.send?.bind(process)
  if (!send) throw new Error('serveRequests(): this process was not forked with an IPC channel')
  const reply = (r: WorkerReply) => {
    try {
      send(r)
    } catch (err) {
      // e.g. a value the IPC serializer cannot clone: report that instead of hanging the caller
      if (r.ok) send({ id: r.id, ok: false, error: serializeError(err) } satisfies WorkerReply)
    }
  }
  process.on('message', (msg: { id?: unknown; message?: unknown }) => {
    if (!msg || typeof msg.id !== 'number') return
    const id = msg.id
    Promise.resolve()
      .then(() => handler(msg.message))
      .then(
        (value) => reply({ id, ok: true, value }),
        (err) => reply({ id, ok: false, error: serializeError(err) }),
      )
  })
  process.once('disconnect', () => process.exit(0))
  send('ready')
}
