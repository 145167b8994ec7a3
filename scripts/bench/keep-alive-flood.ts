// A flood that tries to fill a listener with keep-alive connections (D20, the probe port): N
// connections, each sending a GET every interval ms on its connection, spread over the given
// local addresses (peers on a pod network; on Linux any 127.x.y.z is this machine). A connection
// the server closes is opened again 100 ms later, so the flood holds as many as the server lets
// it. Run as its own process beside a prober (scripts/bench/probe.ts); prints one JSON line:
// requests sent, answers read, and connections opened.
//
//   node scripts/bench/keep-alive-flood.ts <host> <port> <path> <connections> <intervalMs> \
//     <seconds> <localAddress>[,<localAddress>…]
import { connect, type Socket } from 'node:net'

const [host, port, path, connections, intervalMs, seconds, addresses] = process.argv.slice(2)
if (!host || !port || !path || !connections || !intervalMs || !seconds || !addresses) {
  process.stderr.write('usage: see the head of scripts/bench/keep-alive-flood.ts\n')
  process.exit(2)
}

const REOPEN_MS = 100
const request = `GET ${path} HTTP/1.1\r\nHost: ${host}\r\nConnection: keep-alive\r\n\r\n`
const figures = { sent: 0, answers: 0, opened: 0 }
let running = true

/** One of the flood's connections: kept open, and opened again whenever the server closes it. */
function connection(localAddress: string, firstSendMs: number): () => void {
  let socket: Socket | undefined
  const open = () => {
    figures.opened += 1
    const opened = connect({ host, port: Number(port), localAddress })
    opened.on('data', (chunk: Buffer) => {
      // Counted by status lines: each answer starts with one.
      figures.answers += chunk.toString('latin1').split('HTTP/1.1 ').length - 1
    })
    opened.on('error', () => {})
    opened.on('close', () => {
      socket = undefined
      if (running) setTimeout(open, REOPEN_MS)
    })
    socket = opened
  }
  open()
  const send = () => {
    if (socket === undefined || !socket.writable) return
    figures.sent += 1
    socket.write(request)
  }
  let every: NodeJS.Timeout | undefined
  const first = setTimeout(() => {
    send()
    every = setInterval(send, Number(intervalMs))
  }, firstSendMs)
  return () => {
    clearTimeout(first)
    clearInterval(every)
    socket?.destroy()
  }
}

const locals = addresses.split(',')
const stops = Array.from({ length: Number(connections) }, (_, index) =>
  connection(locals[index % locals.length] as string, Math.random() * Number(intervalMs)),
)
setTimeout(() => {
  running = false
  for (const stop of stops) stop()
  process.stdout.write(`${JSON.stringify(figures)}\n`)
}, Number(seconds) * 1000)
