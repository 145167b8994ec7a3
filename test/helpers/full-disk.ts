// A real full disk for the D16 storage-failure tests: they mount a small tmpfs and fill it.
import { closeSync, openSync, writeSync } from 'node:fs'

/** Writes zeros to `path` until the file system has no space left. */
export function fillDisk(path: string): void {
  const fd = openSync(path, 'w')
  try {
    for (const size of [64 * 1024, 4096, 512, 1]) {
      const chunk = Buffer.alloc(size)
      try {
        for (;;) writeSync(fd, chunk)
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'ENOSPC') throw err
      }
    }
  } finally {
    closeSync(fd)
  }
}
