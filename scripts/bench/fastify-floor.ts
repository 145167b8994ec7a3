// The framework floor: what Fastify itself costs on this work. Bare Fastify (the version in
// package.json), no plugins, no schemas, no hooks, logger off (BENCH_LOGGER: a level, as the
// service's), one route per operation doing what
// same-bytes.ts does in the cheapest way Fastify allows: the Authorization header compared as a
// string in the handler, the same SQL and bodies (same-bytes.ts's reads), the service's headers
// set from one frozen object per operation (reply.headers) plus the X-Request-Id that Fastify's
// genReqId makes as the service's does, a string body sent as it is, and the same durable group
// commit for createPet (same-bytes.ts's; Fastify's own JSON body parser), with an
// Idempotency-Key the same database work for it as same-bytes.ts's. Service ÷ floor is what the service adds to Fastify;
// floor ÷ same bytes is what Fastify adds to node:http. The harness checks its statuses, bodies
// and headers against the service's on every run.
//
//   node scripts/bench/fastify-floor.ts <sqlite file>
// with PORT and BENCH_AUTHORIZATION (the whole Authorization header expected) in the environment.
import Fastify, { type FastifyReply, type FastifyRequest } from 'fastify'
import { KEEP_ALIVE_TIMEOUT_MS } from '../../src/http/http-server.ts'
import { requestId } from '../../src/http/plugins/request-id.ts'
import { GroupCommit, openDurable, petReads } from './same-bytes.ts'
import { GET_PET_HEADERS, newPetOf, OPERATION_HEADERS, UNAUTHORIZED } from './same-bytes-http.ts'

const authorization = process.env.BENCH_AUTHORIZATION
const db = openDurable(process.argv[2] ?? '')
const reads = petReads(db)
const commits = new GroupCommit(db)

const level = process.env.BENCH_LOGGER
const logger = level === undefined ? false : { level }
const app = Fastify({ logger, genReqId: requestId, keepAliveTimeout: KEEP_ALIVE_TIMEOUT_MS })

/** The operation's headers and this request's id on the reply. */
function headed(
  request: FastifyRequest,
  reply: FastifyReply,
  headers: Readonly<Record<string, string>>,
): FastifyReply {
  return reply.headers(headers).header('x-request-id', request.id)
}

/** False, and the 401 sent, when the request does not carry the expected key. */
function authorized(request: FastifyRequest, reply: FastifyReply): boolean {
  if (request.headers.authorization === authorization) return true
  headed(request, reply, OPERATION_HEADERS).code(401).send(UNAUTHORIZED)
  return false
}

interface ListQuery {
  limit?: string
  status?: string
  cursor?: string
}

app.get<{ Querystring: ListQuery }>('/v1/pets', (request, reply) => {
  if (!authorized(request, reply)) return
  const { limit, status, cursor } = request.query
  const page = reads.list(limit, status, cursor)
  if (page === undefined) {
    headed(request, reply, OPERATION_HEADERS).code(400).send('{}')
    return
  }
  headed(request, reply, OPERATION_HEADERS)
  if (page.link !== undefined) reply.header('link', page.link)
  reply.send(page.body)
})

app.get<{ Params: { petId: string } }>('/v1/pets/:petId', (request, reply) => {
  if (!authorized(request, reply)) return
  const { petId } = request.params
  const body = /^\d{1,15}$/.test(petId) ? reads.get(Number(petId)) : undefined
  headed(request, reply, GET_PET_HEADERS)
    .code(body === undefined ? 404 : 200)
    .send(body ?? '{}')
})

app.post('/v1/pets', (request, reply) => {
  if (!authorized(request, reply)) return
  const pet = newPetOf(request.body)
  if (pet === undefined) {
    headed(request, reply, OPERATION_HEADERS).code(400).send('{}')
    return
  }
  const key = request.headers['idempotency-key']
  commits.create(pet, typeof key === 'string' ? key : undefined, (err, created) => {
    if (err !== undefined || created === undefined) {
      headed(request, reply, OPERATION_HEADERS).code(503).send('{}')
      return
    }
    headed(request, reply, OPERATION_HEADERS)
      .code(201)
      .header('location', `/v1/pets/${created.id}`)
      .send(JSON.stringify(created))
  })
})

await app.listen({ port: Number(process.env.PORT), host: '127.0.0.1' })
process.stdout.write('ready\n')
