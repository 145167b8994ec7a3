// A deprecated operation is said once per process (per page, in a browser): the first successful
// answer that carries `Deprecation` names the operation and its sunset, so that a program still
// calling it hears of it before the sunset turns it into 410s.
import type { ResponseInfo } from './response.ts'

const warned = new Set<string>()

/** What Node.js's process offers for warnings; typed here since the package has no Node types. */
interface WarningProcess {
  emitWarning(message: string, options: { type: string; code: string }): void
}

/** Says `operation` is deprecated, the first time it answers so in this program. */
export function noticeDeprecation(operation: string, advice: string, info: ResponseInfo): void {
  if (info.deprecation === undefined || warned.has(operation)) return
  warned.add(operation)
  const sunset = info.sunset === undefined ? '' : `; its sunset is ${info.sunset.toUTCString()}`
  const message = `Petstore: ${operation} is deprecated by the service${sunset}, after which it fails with 410 gone. ${advice}`
  const node = (globalThis as { process?: Partial<WarningProcess> }).process
  // A DeprecationWarning in Node.js, so that --no-deprecation silences it and
  // --throw-deprecation makes it fail tests; the console elsewhere.
  if (typeof node?.emitWarning === 'function') {
    node.emitWarning(message, { type: 'DeprecationWarning', code: 'PETSTORE_DEPRECATED_OPERATION' })
  } else console.warn(message)
}
