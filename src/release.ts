// The release this code is: package.json's version, the one number `petstore --version` prints
// and the OpenAPI document's `info.version` carries, read from there (no copy of it in the code
// to fall behind).
import { readFileSync } from 'node:fs'

let version: string | undefined

export function releaseVersion(): string {
  version ??= (
    JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as {
      version: string
    }
  ).version
  return version
}
