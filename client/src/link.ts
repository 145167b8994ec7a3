// The `Link` header field (RFC 8288 §3): a comma-separated list of
//   <URI-Reference> *( OWS ";" OWS token [ "=" ( token / quoted-string ) ] )
// A URI may hold commas and semicolons, and a quoted value commas, so the field is scanned
// rather than split, the way a regular expression would get wrong.

export interface LinkValue {
  /** The target as written, before resolving it. */
  target: string
  /** The relation types of the first `rel` parameter, lower-cased (§3.3). */
  rels: string[]
}

const WHITESPACE = /[ \t]/

export function parseLinkHeader(field: string): LinkValue[] {
  const links: LinkValue[] = []
  let i = 0
  const skipSpace = () => {
    while (i < field.length && WHITESPACE.test(field.charAt(i))) i++
  }
  /** Skips to just after the next comma outside quotes (recovery from a malformed value). */
  const skipValue = () => {
    let quoted = false
    for (; i < field.length; i++) {
      const char = field.charAt(i)
      if (quoted && char === '\\') i++
      else if (char === '"') quoted = !quoted
      else if (char === ',' && !quoted) break
    }
    i++
  }
  while (i < field.length) {
    skipSpace()
    if (field.charAt(i) === ',') {
      i++
      continue
    }
    if (field.charAt(i) !== '<') {
      skipValue()
      continue
    }
    const end = field.indexOf('>', i)
    if (end < 0) break
    const link: LinkValue = { target: field.slice(i + 1, end), rels: [] }
    let relSeen = false
    i = end + 1
    for (;;) {
      skipSpace()
      if (field.charAt(i) !== ';') break
      i++
      skipSpace()
      const nameStart = i
      while (i < field.length && !/[=;,\s]/.test(field.charAt(i))) i++
      const name = field.slice(nameStart, i).toLowerCase()
      skipSpace()
      let value = ''
      if (field.charAt(i) === '=') {
        i++
        skipSpace()
        value = readValue()
      }
      if (name === 'rel' && !relSeen) {
        relSeen = true
        link.rels = value
          .toLowerCase()
          .split(/[ \t]+/)
          .filter(Boolean)
      }
    }
    links.push(link)
    skipValue()
  }
  return links

  /** A token, or a quoted-string with its escapes undone (RFC 9110 §5.6.4). */
  function readValue(): string {
    if (field.charAt(i) !== '"') {
      const start = i
      while (i < field.length && !/[;,\s]/.test(field.charAt(i))) i++
      return field.slice(start, i)
    }
    let value = ''
    for (i++; i < field.length; i++) {
      const char = field.charAt(i)
      if (char === '\\') value += field.charAt(++i)
      else if (char === '"') {
        i++
        break
      } else value += char
    }
    return value
  }
}

/**
 * The target of the first `rel="next"` link, resolved against the address of the response
 * that carried it (its link context, RFC 8288 §3.2). Undefined when there is none.
 */
export function nextLink(field: string | null, context: URL): URL | undefined {
  if (field === null) return undefined
  const next = parseLinkHeader(field).find((link) => link.rels.includes('next'))
  return next === undefined ? undefined : new URL(next.target, context)
}
