// D29: the `Prefer` request field (RFC 7240) as staging reads it. Only the preferences' names and
// values matter here: `code=<status>` and `delay=<ms>`, Prism's spelling. Parameters after `;`
// are allowed and ignored, as are preferences the service does not know (§2: a server ignores
// what it does not understand), and a name given twice counts once, the first time (§2).

/** Each preference's value by its lower-cased name ('' for one without a value), first wins. */
export function readPreferences(field: string): Map<string, string> {
  const preferences = new Map<string, string>()
  for (const preference of splitOutsideQuotes(field, ',')) {
    const [head = ''] = splitOutsideQuotes(preference, ';')
    const equals = head.indexOf('=')
    const name = (equals === -1 ? head : head.slice(0, equals)).trim().toLowerCase()
    if (name === '' || preferences.has(name)) continue
    const value = equals === -1 ? '' : unquote(head.slice(equals + 1).trim())
    preferences.set(name, value)
  }
  return preferences
}

/** `text` cut at each `separator` that is not inside a quoted-string (RFC 9110 §5.6.4). */
function splitOutsideQuotes(text: string, separator: ',' | ';'): string[] {
  const parts: string[] = []
  let start = 0
  let quoted = false
  for (let i = 0; i < text.length; i++) {
    const char = text[i]
    if (quoted && char === '\\') i++
    else if (char === '"') quoted = !quoted
    else if (!quoted && char === separator) {
      parts.push(text.slice(start, i))
      start = i + 1
    }
  }
  parts.push(text.slice(start))
  return parts
}

/** A quoted-string's content with its `\` escapes undone; a token as it is. */
function unquote(word: string): string {
  if (word.length < 2 || !word.startsWith('"') || !word.endsWith('"')) return word
  return word.slice(1, -1).replace(/\\(.)/g, '$1')
}
