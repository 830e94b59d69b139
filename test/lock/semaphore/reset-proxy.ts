/**
 * A TCP proxy that, once armed, lets the next command through to Redis and then resets the
 * client's connection before the reply reaches it: the command ran on the server, its
 * client never heard (Curator 315, 462: a create that succeeded on a connection reset).
 */
import net from 'node:net'

export interface ResetProxy {
  readonly port: number
  /** Reset the connection at the next reply from the server (the reply is dropped). */
  armResetOnReply(): void
  /** Connections reset so far. */
  readonly resets: number
  close(): Promise<void>
}

export async function startResetProxy(targetPort: number): Promise<ResetProxy> {
  let armed = false
  let resets = 0
  const sockets = new Set<net.Socket>()
  const server = net.createServer((client) => {
    const upstream = net.connect({ host: '127.0.0.1', port: targetPort })
    sockets.add(client).add(upstream)
    client.on('data', (chunk) => upstream.write(chunk))
    upstream.on('data', (chunk) => {
      if (armed) {
        armed = false
        resets++
        client.resetAndDestroy()
        upstream.destroy()
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
    get resets() {
      return resets
    },
    async close() {
      for (const socket of sockets) socket.destroy()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}
