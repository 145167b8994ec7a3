// A liveness prober, run as its own process beside the load so that its timings are not those of
// a busy load generator: GET <url> every <interval> ms for <seconds>, each on a new connection
// (as kubelet's HTTP probes do), with a timeout (10 s unless given). Prints one JSON line: for
// every probe, when it started (ms since the first) and its latency in ms, or null for a failure
// (a timeout, an error, an answer other than 200).
//
//   node scripts/bench/probe.ts <url> <seconds> <intervalMs> [timeoutMs]
import { probe as probeOnce } from '../fleet/probe.ts'

const [url, seconds, intervalMs, timeoutMs = '10000'] = process.argv.slice(2)
if (!url || !seconds || !intervalMs) {
  process.stderr.write('usage: node scripts/bench/probe.ts <url> <seconds> <intervalMs>\n')
  process.exit(2)
}

async function probe(): Promise<number | undefined> {
  const { status, ms } = await probeOnce(url as string, Number(timeoutMs))
  return status === 200 ? ms : undefined
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
