/**
 * A TCP proxy on a free 127.0.0.1 port that can black-hole its traffic: connections stay
 * open, nothing is forwarded either way, and nobody is told. That is what a partition or
 * a dead NAT entry looks like to a client (unlike a killed server, which resets the
 * connection), so commands hang until their own timeout.
 */
import net from 'node:net'

export interface BlackholeProxy {
  readonly port: number
  /** Stop forwarding in both directions (bytes are dropped); connections stay open. */
  blackhole(): void
  /** Connections currently open through the proxy. */
  readonly connections: number
  /** Destroys every connection and stops listening. */
  close(): Promise<void>
}

export async function startBlackholeProxy(targetPort: number, targetHost = '127.0.0.1'): Promise<BlackholeProxy> {
  let holed = false
  const sockets = new Set<net.Socket>()
  const server = net.createServer((client) => {
    const upstream = net.connect({ host: targetHost, port: targetPort })
    sockets.add(client)
    sockets.add(upstream)
    const forward = (from: net.Socket, to: net.Socket) =>
      from.on('data', (chunk) => {
        if (!holed) to.write(chunk)
      })
    forward(client, upstream)
    forward(upstream, client)
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
    blackhole() {
      holed = true
    },
    get connections() {
      return sockets.size / 2
    },
    async close() {
      for (const socket of sockets) socket.destroy()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}
