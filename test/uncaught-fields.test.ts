// The line that logs an uncaught error says what it was. For an 'error' event that no
// listener took, it names the emitter and the stack of the emit() call, which a socket error's
// own stack (ending in Node's TCP read) never does.
import assert from 'node:assert/strict'
import { EventEmitter } from 'node:events'
import { test } from 'node:test'
import { uncaughtFields } from '../src/process/shutdown.ts'

class Client extends EventEmitter {}

/** Emits `err` with no listener, as a socket's failure reaches a driver's client: Node throws it. */
function emitUnheard(emitter: EventEmitter, err: Error): unknown {
  try {
    emitter.emit('error', err)
  } catch (thrown) {
    return thrown
  }
  return assert.fail('an unheard error event did not throw')
}

function socketError(): Error {
  return Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET', syscall: 'read' })
}

test('an unheard error event: the emitter, and where it was emitted', () => {
  const err = socketError()
  const thrown = emitUnheard(new Client(), err)
  assert.equal(thrown, err, 'Node throws the error itself')
  const fields = uncaughtFields(thrown, 'uncaughtException')
  assert.equal(fields.err, err)
  assert.equal(fields.origin, 'uncaughtException')
  assert.equal(fields.emitter, 'Client')
  assert.match(fields.emittedAt ?? '', /^ {4}at emitUnheard /)
})

test('an unheard error event on a plain EventEmitter', () => {
  const fields = uncaughtFields(emitUnheard(new EventEmitter(), socketError()), 'uncaughtException')
  assert.equal(fields.emitter, 'EventEmitter')
  assert.match(fields.emittedAt ?? '', /emitUnheard/)
})

test('an error thrown otherwise, or a rejection with something else, is logged as it is', () => {
  const err = new Error('thrown')
  assert.deepEqual(uncaughtFields(err, 'uncaughtException'), { err, origin: 'uncaughtException' })
  assert.deepEqual(uncaughtFields('a reason', 'unhandledRejection'), {
    err: 'a reason',
    origin: 'unhandledRejection',
  })
})
