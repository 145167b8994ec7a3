// Raw HTTP/1.1 over node:net, for what fetch cannot send: malformed requests, pipelining, slow
// or silent clients. The answers are parsed by hand, as a strict client would.
import { once } from 'node:events'
import { connect, type Socket } from 'node:net'

export interface RawResponse {
  status: number
  /** Header names in lower case; a repeated header keeps its last value. */
  headers: Record<string, string>
  body: string
}

/** Opens a TCP connection to the host and port of `url` (http://host:port). */
export async function openSocket(url: string): Promise<Socket> {
  const { hostname, port } = new URL(url)
  const socket = connect({ host: hostname, port: Number(port) })
  await once(socket, 'connect')
  return socket
}

/**
 * Parses every complete response in `data` (each with a Content-Length, as this service always
 * sends for these answers); throws on anything that is not a well-formed HTTP/1.1 response.
 */
export function parseResponses(data: Buffer): RawResponse[] {
  const responses: RawResponse[] = []
  let rest = data
  while (rest.length > 0) {
    const end = rest.indexOf('\r\n\r\n')
    if (end === -1)
      throw new Error(`an incomplete response head: ${rest.toString('latin1').slice(0, 200)}`)
    const [statusLine = '', ...lines] = rest.subarray(0, end).toString('latin1').split('\r\n')
    const match = /^HTTP\/1\.1 (\d{3}) /.exec(statusLine)
    if (!match) throw new Error(`not an HTTP/1.1 status line: ${statusLine}`)
    const headers: Record<string, string> = {}
    for (const line of lines) {
      const colon = line.indexOf(':')
      headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim()
    }
    const length = Number(headers['content-length'] ?? 'NaN')
    if (!Number.isInteger(length))
      throw new Error(`a response without Content-Length: ${statusLine}`)
    const bodyStart = end + 4
    if (rest.length < bodyStart + length) throw new Error('an incomplete response body')
    responses.push({
      status: Number(match[1]),
      headers,
      body: rest.subarray(bodyStart, bodyStart + length).toString('utf8'),
    })
    rest = rest.subarray(bodyStart + length)
  }
  return responses
}

export interface Exchange {
  responses: RawResponse[]
  /** The server closed the connection (rather than the wait running out). */
  closedByServer: boolean
}

/**
 * Sends `bytes` (in the pieces given, each its own write) on a new connection and reads until
 * the server closes it or `waitMs` passes (then closes it from this side), and returns every
 * response received. With `end`, this side says it has sent everything (a TCP half-close).
 */
export async function exchange(
  url: string,
  bytes: string | Buffer | (string | Buffer)[],
  waitMs = 3000,
  { end = false } = {},
): Promise<Exchange> {
  const socket = await openSocket(url)
  const chunks: Buffer[] = []
  socket.on('data', (chunk: Buffer) => chunks.push(chunk))
  socket.on('error', () => {})
  for (const piece of Array.isArray(bytes) ? bytes : [bytes]) socket.write(piece)
  if (end) socket.end()
  const closedByServer = await Promise.race([
    once(socket, 'close').then(() => true),
    new Promise<false>((resolve) => setTimeout(resolve, waitMs, false)),
  ])
  socket.destroy()
  return { responses: parseResponses(Buffer.concat(chunks)), closedByServer }
}

/** A well-formed request, with the headers given (Host and Connection come first). */
export function rawRequest(
  method: string,
  target: string,
  headers: Record<string, string> = {},
  body = '',
): string {
  const all: Record<string, string> = { host: 'localhost', ...headers }
  if (body !== '') all['content-length'] = String(Buffer.byteLength(body))
  const lines = Object.entries(all).map(([name, value]) => `${name}: ${value}\r\n`)
  return `${method} ${target} HTTP/1.1\r\n${lines.join('')}\r\n${body}`
}
