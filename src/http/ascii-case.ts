// Header names and auth schemes compared without regard to case (RFC 9110 §5.1, §11.1), code by
// code: `String.prototype.toLowerCase` is a call into V8's runtime, and these run on every
// request (docs/benchmarks.md, "Where the instructions go, by function").

/** Sets the bit that makes an ASCII capital letter its small one. */
const SMALL = 0x20

/**
 * Whether `text` starts with `letters` (small ASCII letters only) in any case: `code | 0x20` is
 * a small letter only for that letter and its capital.
 */
export function startsWithLetters(text: string, letters: string): boolean {
  if (text.length < letters.length) return false
  for (let i = 0; i < letters.length; i++) {
    if ((text.charCodeAt(i) | SMALL) !== letters.charCodeAt(i)) return false
  }
  return true
}

/** Whether `text` is `letters` (small ASCII letters only) in any case. */
export function isLetters(text: string, letters: string): boolean {
  return text.length === letters.length && startsWithLetters(text, letters)
}
