// An HTTP proxy in front of a listening service that a test tells, request by request, what to
// do: pass it on, pass it on and then drop the answer (the service committed, the client never
// heard), answer for the service with a gateway's HTML 502, hold it unanswered, or pass it on
// with its `Link: rel="next"` pointed at another host (a gateway that rewrites links wrongly).
import { once } from 'node:events'
import {
  createServer,
  type IncomingHttpHeaders,
  type IncomingMessage,
  request,
  type ServerResponse,
} from 'node:http'

export type Fault = 'forward' | 'drop-answer' | 'html-502' | 'hold' | 'foreign-link'

const FOREIGN_LINK = '<http://elsewhere.example/v1/pets?cursor=x>; rel="next"'

export interface ProxiedRequest {
  method: string
  path: string
  headers: IncomingHttpHeaders
  fault: Fault
  /** The service's status and headers, for requests that reached it and were answered. */
  upstream?: { status: number; headers: IncomingHttpHeaders }
}

export interface HttpFaultProxy {
  /** e.g. http://127.0.0.1:40123 */
  url: string
  /** Every request that came in, in order. */
  readonly requests: ProxiedRequest[]
  close(): Promise<void>
}

/** `decide` picks the fault for each request from what came in before it (`seen`, 0-based). */
export async function startHttpFaultProxy(
  target: string,
  decide: (request: IncomingMessage, seen: number) => Fault,
): Promise<HttpFaultProxy> {
  const requests: ProxiedRequest[] = []
  const server = createServer(async (incoming, outgoing) => {
    const fault = decide(incoming, requests.length)
    const record: ProxiedRequest = {
      method: incoming.method ?? '',
      path: incoming.url ?? '',
      headers: incoming.headers,
      fault,
    }
    requests.push(record)
    if (fault === 'hold') return
    if (fault === 'html-502') {
      incoming.resume()
      outgoing.writeHead(502, { 'content-type': 'text/html' })
      outgoing.end('<html><body><h1>502 Bad Gateway</h1></body></html>')
      return
    }
    await pass(target, incoming, outgoing, record)
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  const address = server.address()
  if (address === null || typeof address === 'string') throw new Error('no TCP address')
  return {
    url: `http://127.0.0.1:${address.port}`,
    requests,
    async close() {
      server.closeAllConnections()
      await new Promise((resolve) => server.close(resolve))
    },
  }
}

/** Sends the request on to the service and its whole answer back, unless told to drop it. */
async function pass(
  target: string,
  incoming: IncomingMessage,
  outgoing: ServerResponse,
  record: ProxiedRequest,
): Promise<void> {
  const upstream = request(new URL(incoming.url ?? '/', target), {
    method: incoming.method,
    headers: incoming.headers,
  })
  incoming.pipe(upstream)
  const [answer] = (await once(upstream, 'response')) as [IncomingMessage]
  const chunks: Buffer[] = []
  for await (const chunk of answer) chunks.push(chunk as Buffer)
  record.upstream = { status: answer.statusCode ?? 0, headers: answer.headers }
  if (record.fault === 'drop-answer') {
    // The service has answered, so it has committed; the client sees its connection reset.
    outgoing.socket?.resetAndDestroy()
    return
  }
  const headers =
    record.fault === 'foreign-link' ? { ...answer.headers, link: FOREIGN_LINK } : answer.headers
  outgoing.writeHead(answer.statusCode ?? 502, headers)
  outgoing.end(Buffer.concat(chunks))
}
