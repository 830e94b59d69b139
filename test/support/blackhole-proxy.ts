/**
 * A TCP proxy on a free 127.0.0.1 port that can black-hole its traffic: connections stay
 * open, nothing is forwarded either way, and nobody is told. That is what a partition or
 * a dead NAT entry looks like to a client (unlike a killed server, which resets the
 * connection), so commands hang until their own timeout. It can also stall traffic instead:
 * bytes are held, in order, and forwarded on `resume()`: a slow server or a slow network,
 * where every command still happens, late.
 */
import net from 'node:net'

export interface BlackholeProxy {
  readonly port: number
  /** Stop forwarding in both directions (bytes are dropped); connections stay open. */
  blackhole(): void
  /**
   * Hold bytes instead of forwarding them: the server's replies (`'replies'`: commands still
   * reach the server and run, their answers are late) or both directions (`'both'`).
   */
  stall(what: 'replies' | 'both'): void
  /** Forward every held byte, in order, and forward as usual from now on. */
  resume(): void
  /**
   * End a black hole: the connections it cut are reset (what they carried is lost midway, so
   * they cannot go on), and new ones are forwarded again. Clients see the partition end as a
   * dropped connection they reconnect.
   */
  heal(): void
  /** Connections currently open through the proxy. */
  readonly connections: number
  /** Destroys every connection and stops listening. */
  close(): Promise<void>
}

export async function startBlackholeProxy(targetPort: number, targetHost = '127.0.0.1'): Promise<BlackholeProxy> {
  let holed = false
  let stalled: 'replies' | 'both' | undefined
  /** Bytes held while stalled, per destination socket, in arrival order. */
  const held: { to: net.Socket; chunk: Buffer }[] = []
  const sockets = new Set<net.Socket>()
  const server = net.createServer((client) => {
    const upstream = net.connect({ host: targetHost, port: targetPort })
    sockets.add(client)
    sockets.add(upstream)
    const forward = (from: net.Socket, to: net.Socket, isReply: boolean) =>
      from.on('data', (chunk: Buffer) => {
        if (holed) return
        if (stalled === 'both' || (stalled === 'replies' && isReply)) held.push({ to, chunk })
        else to.write(chunk)
      })
    forward(client, upstream, false)
    forward(upstream, client, true)
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
    stall(what) {
      stalled = what
    },
    resume() {
      stalled = undefined
      for (const { to, chunk } of held.splice(0)) if (!to.destroyed) to.write(chunk)
    },
    heal() {
      holed = false
      for (const socket of sockets) socket.destroy()
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
