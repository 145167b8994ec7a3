// A liveness prober, run as its own process beside the load so that its timings are not those of
// a busy load generator: GET <url> every <interval> ms for <seconds>, each on a new connection
// (as kubelet's HTTP probes do), with a 10 s timeout. Prints one JSON line: for every probe, when
// it started (ms since the first) and its latency in ms, or null for a failure (a timeout, an
// error, an answer other than 200).
//
//   node scripts/bench/probe.ts <url> <seconds> <intervalMs>
import { get } from 'node:http'

const [url, seconds, intervalMs] = process.argv.slice(2)
if (!url || !seconds || !intervalMs) {
  process.stderr.write('usage: node scripts/bench/probe.ts <url> <seconds> <intervalMs>\n')
  process.exit(2)
}

function probe(): Promise<number | undefined> {
  return new Promise((resolve) => {
    const started = performance.now()
    const request = get(url as string, { agent: false, timeout: 10_000 }, (response) => {
      response.resume()
      response.on('end', () =>
        resolve(response.statusCode === 200 ? performance.now() - started : undefined),
      )
    })
    request.on('timeout', () => request.destroy())
    request.on('error', () => resolve(undefined))
  })
}

const probes: [number, number | null][] = []
const start = performance.now()
const end = start + Number(seconds) * 1000
while (performance.now() < end) {
  const next = performance.now() + Number(intervalMs)
  const at = performance.now() - start
  probes.push([at, (await probe()) ?? null])
  const wait = next - performance.now()
  if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait))
}
process.stdout.write(`${JSON.stringify({ probes })}\n`)
