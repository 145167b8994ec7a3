// A TCP proxy a test controls, put between the service and its database to take the database
// away and give it back: `refuse` drops every connection and stops listening (connects are
// refused at once), `stall` keeps connections open but passes nothing (a silent network, where
// only timeouts help), `forward` resumes normal service.
import { connect, createServer, type Socket } from 'node:net'

export type ProxyMode = 'forward' | 'refuse' | 'stall'

export interface TcpProxy {
  readonly port: number
  setMode(mode: ProxyMode): Promise<void>
  close(): Promise<void>
}

interface Pair {
  client: Socket
  upstream?: Socket
}

function destroyPair(pair: Pair): void {
  const { client } = pair
  // A reset, not a polite close: what the client sees when a network path or server dies.
  // Not once a graceful end has begun: on Node 24 a reset racing that shutdown can leave the
  // handle referenced, and the process then spins forever while exiting.
  if (!client.destroyed) {
    if (client.writableEnded) client.destroy()
    else client.resetAndDestroy()
  }
  pair.upstream?.destroy()
}

export async function startTcpProxy(target: { host: string; port: number }): Promise<TcpProxy> {
  let mode: ProxyMode = 'forward'
  const pairs = new Set<Pair>()

  const forward = (pair: Pair) => {
    const upstream = connect(target.port, target.host)
    pair.upstream = upstream
    pair.client.pipe(upstream).pipe(pair.client)
    upstream.on('error', () => destroyPair(pair))
  }

  const server = createServer((client) => {
    const pair: Pair = { client }
    pairs.add(pair)
    client.on('error', () => destroyPair(pair))
    client.on('close', () => {
      destroyPair(pair)
      pairs.delete(pair)
    })
    // Stalled: accept, then never answer (the client's startup message goes nowhere).
    if (mode === 'stall') client.pause()
    else forward(pair)
  })

  const listen = (port: number) =>
    new Promise<void>((resolve, reject) => {
      server.once('error', reject)
      server.listen(port, '127.0.0.1', () => {
        server.off('error', reject)
        resolve()
      })
    })

  await listen(0)
  const address = server.address()
  if (address === null || typeof address === 'string') throw new Error('proxy has no TCP port')
  const port = address.port

  const dropAll = () => {
    for (const pair of pairs) destroyPair(pair)
    pairs.clear()
  }

  return {
    port,
    async setMode(next) {
      const previous = mode
      mode = next
      if (next === 'refuse') {
        dropAll()
        if (server.listening) await new Promise((resolve) => server.close(resolve))
      } else if (next === 'stall') {
        // Existing connections stop passing data both ways, as on a partitioned network.
        for (const pair of pairs) {
          pair.client.unpipe()
          pair.upstream?.unpipe()
          pair.client.pause()
          pair.upstream?.pause()
        }
      } else {
        // Connections that lived through a stall are beyond repair; clients reconnect.
        if (previous === 'stall') dropAll()
        if (!server.listening) await listen(port)
      }
    },
    async close() {
      dropAll()
      if (server.listening) await new Promise((resolve) => server.close(resolve))
    },
  }
}
