// D20: how many connections a side listener holds, without ever refusing a newcomer. A server's
// own `maxConnections` refuses every connection past the limit, so whoever fills the limit first
// (any peer that reaches the port, holding keep-alive connections) shuts out the orchestrator's
// probes, and a healthy process is restarted. Here a newcomer is always taken, and room is made by
// closing the oldest connection of the address that holds the most: a flood from a few addresses
// pays for itself, and a kubelet that opens a connection per probe (a handful at a time) keeps
// its own.
import type { Server, Socket } from 'node:net'

export interface ConnectionCap {
  /** Open connections at most; past it, one is closed for each newcomer. */
  total: number
  /** Open connections from one address at most; past it, that address's oldest is closed. */
  perAddress: number
}

/** Each address's open connections, oldest first (a Set keeps insertion order). */
type Held = Map<string, Set<Socket>>

function addressOf(socket: Socket): string {
  // A socket whose peer has already gone has no remoteAddress: one bucket holds all of those.
  return socket.remoteAddress ?? ''
}

/** The address holding the most connections (the first found among equals). */
function largest(held: Held): string | undefined {
  let most: string | undefined
  let size = 0
  for (const [address, sockets] of held) {
    if (sockets.size > size) {
      most = address
      size = sockets.size
    }
  }
  return most
}

function closeOldest(held: Held, address: string): void {
  const sockets = held.get(address)
  const oldest = sockets?.values().next().value
  if (sockets === undefined || oldest === undefined) return
  // destroy() emits 'close' later: forgotten now, so that the count is right at once.
  sockets.delete(oldest)
  if (sockets.size === 0) held.delete(address)
  oldest.destroy()
}

/** Applies `cap` to `server`'s connections from now on. */
export function capConnections(server: Server, cap: ConnectionCap): void {
  const held: Held = new Map()
  let open = 0
  server.on('connection', (socket: Socket) => {
    const address = addressOf(socket)
    const full = (held.get(address)?.size ?? 0) >= cap.perAddress
    // The newcomer takes the place of the connection closed for it, or a new one.
    const from = full ? address : open >= cap.total ? largest(held) : undefined
    if (from === undefined) open += 1
    else closeOldest(held, from)
    const mine = held.get(address) ?? new Set<Socket>()
    held.set(address, mine.add(socket))
    socket.once('close', () => {
      const sockets = held.get(address)
      if (sockets?.delete(socket) !== true) return
      open -= 1
      if (sockets.size === 0) held.delete(address)
    })
  })
}
