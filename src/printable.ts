// Text that came from outside the process (a database's rows, a client's header), made safe to
// print where a person or a log reader takes each line as the process's own (issue 53: a
// migration's name read from the ledger put a newline and terminal escapes into stderr). Escaped
// as a JSON string's content is, and further: the characters JSON leaves as they are but a
// terminal or an editor acts on (DEL, the C1 controls with CSI among them, bidirectional
// overrides and isolates, line and paragraph separators, the byte order mark), and cut.

/** Characters JSON.stringify leaves raw that a terminal or an editor acts on. */
const ACTIVE_CHARACTERS = /[\u007f-\u009f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ufeff]/g

/** Past this many characters, text is cut and ends with "…". */
export const PRINTABLE_LENGTH = 200

/** `text` escaped as the content of a JSON string (without its quotes), and more; see above. */
export function printable(text: string, maxLength = PRINTABLE_LENGTH): string {
  const cut = text.length > maxLength ? `${text.slice(0, maxLength)}…` : text
  return JSON.stringify(cut)
    .slice(1, -1)
    .replace(ACTIVE_CHARACTERS, (char) => `\\u${char.charCodeAt(0).toString(16).padStart(4, '0')}`)
}

/**
 * The collector's endpoint as it is logged: origin and path. Its user, password and query, where
 * a collector's credentials go (`https://user:token@host/v1/traces?api-key=…`), stay with the
 * exporter, which reads the endpoint from the environment itself (issue 46).
 */
export function loggableEndpoint(endpoint: string): string {
  const url = new URL(endpoint)
  return `${url.origin}${url.pathname}`
}
