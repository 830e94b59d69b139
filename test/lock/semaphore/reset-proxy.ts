/**
 * A TCP proxy that resets a client's connection after its command ran on the server and
 * before the reply reaches it (Curator 315, 462: a create that succeeded on a connection
 * reset). Two ways to arm it:
 * - `armResetOnReply()`: the next reply from the server, on any connection, is dropped and
 *   that connection reset (Redis: one command, one reply, on a warmed-up connection);
 * - `armResetOnRequest(marker, ran)`: for protocols with traffic of their own (PostgreSQL,
 *   etcd's gRPC, ZooKeeper's pings): the first request carrying `marker` marks its
 *   connection; from then on nothing the server sends on it reaches the client, and once
 *   `ran()` confirms (read directly from the store) that the request took effect, the
 *   connection is reset.
 */
import net from 'node:net'

export interface ResetProxy {
  readonly port: number
  /** Reset the connection at the next reply from the server (the reply is dropped). */
  armResetOnReply(): void
  /** Reset the connection that sends `marker`, once `ran()` says its request took effect (polled, 10 s at most). */
  armResetOnRequest(marker: string, ran: () => Promise<boolean>): void
  /** Connections reset so far. */
  readonly resets: number
  /** Resets armed by `armResetOnRequest` whose `ran()` confirmed the request took effect before the reset. */
  readonly confirmedRuns: number
  close(): Promise<void>
}

const RAN_TIMEOUT_MS = 10_000

export async function startResetProxy(targetPort: number): Promise<ResetProxy> {
  let armed = false
  let onRequest: { marker: Buffer; ran: () => Promise<boolean> } | undefined
  let resets = 0
  let confirmedRuns = 0
  const sockets = new Set<net.Socket>()
  const server = net.createServer((client) => {
    const upstream = net.connect({ host: '127.0.0.1', port: targetPort })
    let muted = false // the server's replies on this connection are withheld from now on
    sockets.add(client).add(upstream)
    const reset = () => {
      resets++
      client.resetAndDestroy()
      upstream.destroy()
    }
    client.on('data', (chunk: Buffer) => {
      if (onRequest && chunk.includes(onRequest.marker)) {
        const { ran } = onRequest
        onRequest = undefined
        muted = true
        void untilRan(ran).then((confirmed) => {
          if (confirmed) confirmedRuns++
          reset()
        })
      }
      upstream.write(chunk)
    })
    upstream.on('data', (chunk) => {
      if (muted) return
      if (armed) {
        armed = false
        reset()
        return
      }
      client.write(chunk)
    })
    const end = () => {
      client.destroy()
      upstream.destroy()
      sockets.delete(client)
      sockets.delete(upstream)
    }
    client.on('error', end).on('close', end)
    upstream.on('error', end).on('close', end)
  })
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen({ host: '127.0.0.1', port: 0 }, resolve)
  })
  return {
    port: (server.address() as net.AddressInfo).port,
    armResetOnReply() {
      armed = true
    },
    armResetOnRequest(marker, ran) {
      onRequest = { marker: Buffer.from(marker), ran }
    },
    get resets() {
      return resets
    },
    get confirmedRuns() {
      return confirmedRuns
    },
    async close() {
      for (const socket of sockets) socket.destroy()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}

async function untilRan(ran: () => Promise<boolean>): Promise<boolean> {
  const deadline = performance.now() + RAN_TIMEOUT_MS
  while (performance.now() < deadline) {
    if (await ran().catch(() => false)) return true
    await new Promise((resolve) => setTimeout(resolve, 5))
  }
  return false
}
