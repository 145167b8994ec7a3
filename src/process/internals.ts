// The one private part of Node.js the process's error log uses (shutdown.ts), fenced here with
// the versions it was checked on; test/internals.test.ts fails, naming this module, when a
// release changes its shape.
//
// Checked on Node.js 24.21.0 and 26.10.0: when an 'error' event has no listener, node:events
// throws the error with a symbol property described `kEnhanceStackBeforeInspector`, a function
// that returns the error's stack followed by "Emitted 'error' event on <Class> instance at:" and
// the stack of the emit() call. Node calls it only when it prints an error that ends the
// process; there is no public way to learn which emitter an unheard error came from.

const EMITTED_BY = 'kEnhanceStackBeforeInspector'

/**
 * The text node:events attaches to an unheard 'error' event's error: its stack, then where it
 * was emitted. Undefined for any other error, or when the property is not what this module
 * expects.
 */
export function emittedErrorStack(err: Error): string | undefined {
  const symbol = Object.getOwnPropertySymbols(err).find((s) => s.description === EMITTED_BY)
  if (symbol === undefined) return undefined
  const enhance: unknown = Reflect.get(err, symbol)
  if (typeof enhance !== 'function') return undefined
  try {
    const text: unknown = enhance()
    return typeof text === 'string' ? text : undefined
  } catch {
    return undefined
  }
}
