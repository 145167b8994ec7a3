// A TCP port on 127.0.0.1 that nothing listens on now, for a server that cannot be told port 0
// (PgBouncer, the benchmark's servers).
import { once } from 'node:events'
import { createServer } from 'node:net'

export async function freePort(): Promise<number> {
  const server = createServer().listen(0, '127.0.0.1')
  await once(server, 'listening')
  const address = server.address()
  server.close()
  if (address === null || typeof address === 'string') throw new Error('no TCP address')
  return address.port
}
