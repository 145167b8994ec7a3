// A TCP proxy the test controls, to make a dependency (here Redis) go away, hang, and come back
// without touching the real server that other tests share.
import { connect, createServer, type Server, type Socket } from 'node:net'

export interface CuttableProxy {
  port: number
  /** Stops listening and drops every connection: clients see their connection reset/refused. */
  cut(): Promise<void>
  /** Listens again on the same port. */
  restore(): Promise<void>
  /** Keeps connections open but forwards nothing: a server that hangs. */
  stall(): void
  /** Forwards again, including what was held back while stalled. */
  unstall(): void
  close(): Promise<void>
}

export async function startCuttableProxy(target: {
  host: string
  port: number
}): Promise<CuttableProxy> {
  const pairs = new Set<[Socket, Socket]>()
  /** Chunks held back while stalled, in arrival order, with where they go. */
  let held: [Socket, Buffer][] = []
  let stalled = false

  function forward(from: Socket, to: Socket): void {
    from.on('data', (chunk: Buffer) => {
      if (stalled) held.push([to, chunk])
      else to.write(chunk)
    })
  }

  function accept(client: Socket): void {
    const upstream = connect(target)
    const pair: [Socket, Socket] = [client, upstream]
    pairs.add(pair)
    forward(client, upstream)
    forward(upstream, client)
    const drop = () => {
      pairs.delete(pair)
      client.destroy()
      upstream.destroy()
    }
    client.on('error', drop).on('close', drop)
    upstream.on('error', drop).on('close', drop)
  }

  let server: Server = createServer(accept)
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const address = server.address()
  if (address === null || typeof address === 'string') throw new Error('no TCP address')
  const { port } = address

  return {
    port,
    async cut() {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()))
      for (const pair of pairs) for (const socket of pair) socket.destroy()
      await closed
    },
    async restore() {
      server = createServer(accept)
      await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve))
    },
    stall() {
      stalled = true
    },
    unstall() {
      stalled = false
      for (const [to, chunk] of held) if (!to.destroyed) to.write(chunk)
      held = []
    },
    async close() {
      for (const pair of pairs) for (const socket of pair) socket.destroy()
      if (server.listening) await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}
