// A micro-benchmark of the JSON body parser (src/http/plugins/json-body.ts): the time to turn a
// request body's bytes into its value, on a typical NewPet and on bodies at the 16 KiB limit,
// beside what the checks cost on top of a plain decode and JSON.parse (what Fastify's own parser
// did). In µs per body: the fastest of 15 rounds, the two parsers alternating round by round, so
// that other work on the machine shows as little as it can.
//
//   node scripts/bench/json-body.ts

import { BODY_LIMIT_BYTES } from '../../src/contract/limits.ts'
import { parseJsonBody } from '../../src/http/plugins/json-body.ts'

/** Decoding with U+FFFD for bad bytes, then JSON.parse: no UTF-8, key or number checks. */
function plainParse(bytes: Buffer): unknown {
  return JSON.parse(bytes.toString('utf8'))
}

function padTo(head: string, filler: string, tail: string): Buffer {
  const room = BODY_LIMIT_BYTES - Buffer.byteLength(head + tail)
  return Buffer.from(head + filler.repeat(Math.floor(room / Buffer.byteLength(filler))) + tail)
}

const pet = '{"name":"Rex","categoryId":1,"status":"available"}'
const bodies: [label: string, bytes: Buffer][] = [
  [`typical NewPet (${Buffer.byteLength(pet)} B)`, Buffer.from(pet)],
  [
    'NewPet with a non-ASCII name (61 B)',
    Buffer.from('{"name":"Rex 🐶 柴犬 é","categoryId":1,"status":"sold"}'),
  ],
  ['16 KiB: a NewPet padded with white space', padTo(pet, ' ', '')],
  ['16 KiB: one long ASCII string', padTo('{"name":"Rex","categoryId":1,"note":"', 'y', '"}')],
  [
    '16 KiB: one long non-ASCII string (é)',
    padTo('{"name":"Rex","categoryId":1,"note":"', 'é', '"}'),
  ],
  ['16 KiB: ~1,500 keys', padTo('{"name":"Rex","categoryId":1', ',"k0000":1', '}')],
]
// Give every padded key its own name, so the body is one a client could send.
{
  const [, manyKeys] = bodies[5] as [string, Buffer]
  let n = 0
  const text = manyKeys.toString().replace(/"k0000"/g, () => `"k${String(n++).padStart(4, '0')}"`)
  bodies[5] = [`16 KiB: ${n + 2} keys`, Buffer.from(text)]
}

function round(fn: (bytes: Buffer) => unknown, bytes: Buffer, iterations: number): number {
  const start = process.hrtime.bigint()
  for (let i = 0; i < iterations; i++) fn(bytes)
  return Number(process.hrtime.bigint() - start) / iterations / 1000
}

for (const [, bytes] of bodies) {
  if (bytes.length > BODY_LIMIT_BYTES) throw new Error(`a body of ${bytes.length} bytes`)
  parseJsonBody(bytes) // each body is one the parser accepts
}
process.stdout.write(
  '| body | bytes | decode + JSON.parse (µs) | parseJsonBody (µs) | checks (µs) |\n',
)
process.stdout.write('| --- | ---: | ---: | ---: | ---: |\n')
for (const [label, bytes] of bodies) {
  const iterations = bytes.length > 1000 ? 2_000 : 100_000
  let plain = Number.POSITIVE_INFINITY
  let checked = Number.POSITIVE_INFINITY
  round(plainParse, bytes, iterations) // warm up both
  round(parseJsonBody, bytes, iterations)
  for (let i = 0; i < 15; i++) {
    plain = Math.min(plain, round(plainParse, bytes, iterations))
    checked = Math.min(checked, round(parseJsonBody, bytes, iterations))
  }
  process.stdout.write(
    `| ${label} | ${bytes.length} | ${plain.toFixed(2)} | ${checked.toFixed(2)} | ${(checked - plain).toFixed(2)} |\n`,
  )
}
