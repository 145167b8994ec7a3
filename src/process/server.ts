// `petstore serve`: one instance in this process, listening, with a graceful shutdown (D11).
// `serve --workers N` runs the same instance in N cluster workers instead (cluster.ts).
import type { Config } from '../config.ts'
import { startInstance } from './instance.ts'
import { noticeUnknownSettings, noticeUnprefixedKeys, startLine } from './prepare.ts'
import {
  drainAndExit,
  dropWritesToGonePipes,
  onTerminationSignals,
  uncaughtFields,
} from './shutdown.ts'

export async function serve(config: Readonly<Config>): Promise<void> {
  const instance = await startInstance(config)
  const { log } = instance.app

  // D11 (shutdown.ts): the first signal drains; a later one, or an uncaught error during the
  // drain, ends the process at once.
  let stopping = false
  const stop = (reason: object, code: number) => {
    if (stopping) return
    stopping = true
    drainAndExit(() => instance.close(), log, reason, code)
  }
  onTerminationSignals({
    first: (signal) => stop({ signal }, 0),
    again: (signal) => {
      log.warn({ signal }, `second ${signal}: stopping now`)
      process.exit(1)
    },
  })
  const fail = (err: unknown, origin: string) => {
    log.error(uncaughtFields(err, origin), 'shutting down after an uncaught error')
    if (stopping) process.exit(1)
    stop({ reason: 'uncaught error' }, 1)
  }
  process.on('uncaughtException', fail)
  process.on('unhandledRejection', (reason) => fail(reason, 'unhandledRejection'))
  dropWritesToGonePipes()

  const start = startLine(config, 1)
  log.info(start.fields, start.message)
  noticeUnprefixedKeys(config, log)
  noticeUnknownSettings(config, log)
  await instance.listen()
}
