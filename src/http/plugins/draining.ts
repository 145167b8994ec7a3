// D11: once the service drains, in-flight requests finish and their connections close, so the
// server stops as soon as they are answered instead of waiting out the keep-alive timeout.
//
// Node's server.close() closes the connections that are idle at that moment and then waits for
// the rest to end by themselves, which a keep-alive connection does only after its idle timeout
// (72 s here, well past the 10 s grace). So each response sent while draining says
// `Connection: close`, and until the server has closed, connections that fall idle are closed too
// (a response that was already being written when draining began kept its keep-alive).
import fp from 'fastify-plugin'
import type { Lifecycle } from '../../lifecycle.ts'

const IDLE_SWEEP_MS = 50

export const draining = fp<{ lifecycle: Lifecycle }>(async (app, { lifecycle }) => {
  app.addHook('onSend', (_request, reply, payload, done) => {
    if (lifecycle.draining) reply.header('connection', 'close')
    done(null, payload)
  })

  let sweep: NodeJS.Timeout | undefined
  app.addHook('preClose', (done) => {
    sweep = setInterval(() => app.server.closeIdleConnections(), IDLE_SWEEP_MS).unref()
    done()
  })
  app.addHook('onClose', (_app, done) => {
    clearInterval(sweep)
    done()
  })
})
