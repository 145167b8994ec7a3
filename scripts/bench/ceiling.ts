// The ceiling: the fastest a Node.js HTTP service can answer here. A raw node:http server that
// checks the Authorization header and answers each URL with a precomputed JSON string (a string
// body measured faster than a Buffer), byte for byte the body our service sends for it.
//
//   node scripts/bench/ceiling.ts <responses.json>   (PORT and BENCH_KEY in the environment)
// responses.json: { "authorization": "Bearer …", "get": { "<url>": "<body>" }, "post": "<body>" }
import { readFileSync } from 'node:fs'
import { createServer } from 'node:http'

const file = process.argv[2] ?? ''
const { authorization, get, post } = JSON.parse(readFileSync(file, 'utf8')) as {
  authorization: string
  get: Record<string, string>
  post: string
}
const JSON_TYPE = { 'content-type': 'application/json; charset=utf-8' }

createServer((req, res) => {
  if (req.headers.authorization !== authorization) {
    res.writeHead(401, JSON_TYPE).end('{"code":"unauthorized","message":"no","status":401}')
  } else if (req.method === 'POST') {
    req.resume().on('end', () => res.writeHead(201, JSON_TYPE).end(post))
  } else {
    const body = get[req.url ?? '']
    if (body === undefined) res.writeHead(404, JSON_TYPE).end('{}')
    else res.writeHead(200, JSON_TYPE).end(body)
  }
}).listen(Number(process.env.PORT), '127.0.0.1', () => process.stdout.write('ready\n'))
