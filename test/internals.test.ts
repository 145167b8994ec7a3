// The private parts of Node.js and Fastify the service relies on, each fenced in one module with the
// versions it was checked on. When a release of Node.js changes one of them, this fails and
// names the module to look at; the service itself only loses what the part gave (a memory
// saving, a log field), never a request.
import assert from 'node:assert/strict'
import { EventEmitter, once } from 'node:events'
import { createServer } from 'node:http'
import { connect, type Socket } from 'node:net'
import { test } from 'node:test'
import Fastify from 'fastify'
import { dropFurtherRequests, replyHeadersFound, setReplyHeaders } from '../src/http/internals.ts'
import { emittedErrorStack } from '../src/process/internals.ts'

const HTTP_INTERNALS = `src/http/internals.ts no longer fits Node.js ${process.version}`
const PROCESS_INTERNALS = `src/process/internals.ts no longer fits Node.js ${process.version}`

test("src/http/internals.ts: a connection's parser drops the requests it parses after", async () => {
  let seen = 0
  let dropped: boolean | undefined
  const server = createServer((req, res) => {
    seen += 1
    dropped ??= dropFurtherRequests(req.socket)
    res.end('first')
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  const { port } = server.address() as { port: number }
  try {
    const client: Socket = connect(port, '127.0.0.1')
    await once(client, 'connect')
    // Three requests in one write: the parser reads them all from one chunk.
    const request = 'GET / HTTP/1.1\r\nHost: x\r\n\r\n'
    client.end(request.repeat(3))
    let answer = ''
    client.setEncoding('latin1')
    client.on('data', (chunk: string) => {
      answer += chunk
    })
    await once(client, 'close')
    assert.equal(dropped, true, `${HTTP_INTERNALS}: the socket has no parser with onIncoming`)
    assert.equal(seen, 1, `${HTTP_INTERNALS}: the requests after the first still reached the app`)
    assert.equal(answer.match(/HTTP\/1\.1 200/g)?.length, 1, 'the first request is answered')
  } finally {
    server.close()
  }
})

test('src/http/internals.ts: a Fastify reply keeps the headers it sends where setReplyHeaders puts them', async () => {
  const app = Fastify()
  let found: boolean | undefined
  app.get('/', (_request, reply) => {
    found = replyHeadersFound(reply)
    setReplyHeaders(reply, { 'x-one': '1', 'cache-control': 'no-store' })
    reply.header('X-Two', '2')
    return reply.send('ok')
  })
  try {
    const response = await app.inject('/')
    assert.equal(found, true, `${HTTP_INTERNALS}: no fastify.reply.headers symbol on a reply`)
    assert.equal(
      response.headers['x-one'],
      '1',
      `${HTTP_INTERNALS}: a header copied in was not sent`,
    )
    assert.equal(response.headers['cache-control'], 'no-store')
    assert.equal(response.headers['x-two'], '2', 'a header set the public way is sent beside them')
  } finally {
    await app.close()
  }
})

class Client extends EventEmitter {}

test("src/process/internals.ts: an unheard 'error' event's error says where it was emitted", () => {
  const err = new Error('read ECONNRESET')
  try {
    new Client().emit('error', err)
  } catch {}
  const text = emittedErrorStack(err)
  assert.notEqual(text, undefined, `${PROCESS_INTERNALS}: no kEnhanceStackBeforeInspector`)
  assert.match(
    text ?? '',
    /\nEmitted 'error' event on Client instance at:\n {4}at /,
    `${PROCESS_INTERNALS}: the text changed`,
  )
  assert.equal(emittedErrorStack(new Error('thrown')), undefined, 'other errors have none')
})
