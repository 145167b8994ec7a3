// D26: the files of a folder that stays the same for the process's life (swagger-ui's, behind
// /docs) are compressed once per content coding and kept. Compressed per request, as the plugin
// does, swagger-ui's bundle cost tens of milliseconds of CPU each time, to anyone, without a key:
// a cheap way to use up the service's CPU. Kept, a request for it costs a copy from memory.
//
// Compressed on the first request for each file and coding, not at start: most processes never
// serve /docs (test servers, the CLI, instances no one browses), and compressing every file in
// both codings at start would cost each of them CPU and about 1.3 MB that it never uses. The
// first compression runs on libuv's pool (zlib's asynchronous API), not on the event loop, and
// requests that come meanwhile wait for that same one. Bounded: one entry at most per file the
// folder had at start and coding we offer; nothing else a client sends can add one.
import { readdirSync } from 'node:fs'
import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { type ContentCoding, compressWhole } from './plugins/compression.ts'

export class CompressedFiles {
  readonly #folder: string
  readonly #names: ReadonlySet<string>
  /** By `<coding>:<name>`: the compression under way or done. */
  readonly #kept = new Map<string, Promise<Buffer>>()
  readonly #compressions = new Map<string, number>()

  constructor(folder: string) {
    this.#folder = folder
    const entries = readdirSync(folder, { withFileTypes: true })
    this.#names = new Set(entries.filter((entry) => entry.isFile()).map((entry) => entry.name))
  }

  /** Whether `name` is one of the folder's files (as the folder was at start). */
  has(name: string): boolean {
    return this.#names.has(name)
  }

  /** The file in `coding`: compressed on the first call for the pair, the same bytes after it. */
  compressed(name: string, coding: ContentCoding): Promise<Buffer> {
    if (!this.has(name)) return Promise.reject(new Error(`${name} is not a file of the folder`))
    const key = `${coding}:${name}`
    const kept = this.#kept.get(key)
    if (kept !== undefined) return kept
    const made = this.#compress(name, coding, key)
    this.#kept.set(key, made)
    // A failed read is not kept: the next request tries again.
    made.catch(() => this.#kept.delete(key))
    return made
  }

  /** How many times `name` has been compressed in `coding` in this process: once, or never. */
  compressions(name: string, coding: ContentCoding): number {
    return this.#compressions.get(`${coding}:${name}`) ?? 0
  }

  async #compress(name: string, coding: ContentCoding, key: string): Promise<Buffer> {
    this.#compressions.set(key, this.compressions(name, coding) + 1)
    return compressWhole(await readFile(join(this.#folder, name)), coding)
  }
}
