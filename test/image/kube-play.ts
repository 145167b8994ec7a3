// deploy/kubernetes/README.md's "Without a cluster" steps for `podman kube play`, as a user runs
// them: its three `sh` blocks (start, stop, and the lower limits a host like this one needs),
// each run as written by `sh -e` in a folder of the run's own, where `deploy` is the clone's.
// What this host adds goes around the commands, never into them: a `podman` first on PATH that
// passes podman's storage and runtime options (podman.ts), and, where kubectl is not installed,
// a `kubectl kustomize` that renders with kustomize.ts (where kubectl is there,
// kubectlDiffers holds the two equal).
import { chmodSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { isDeepStrictEqual } from 'node:util'
import { ROOT } from './commands.ts'
import { KUBERNETES, parseYaml, render } from './kustomize.ts'
import { GLOBAL, type Result, run } from './podman.ts'

export interface KubePlaySteps {
  start: string
  stop: string
  /** The lower default limits for `kube play`, for a host that refuses podman's own. */
  limits: string
}

/** The three `sh` blocks of the README's "Without a cluster", in the order the page has them. */
export function kubePlaySteps(
  page = readFileSync(join(ROOT, 'deploy', 'kubernetes', 'README.md'), 'utf8'),
): KubePlaySteps {
  const section = /\n## Without a cluster\n([\s\S]*?)\n## /.exec(page)?.[1] ?? ''
  const blocks = [...section.matchAll(/```sh\n([\s\S]*?)```/g)].map((match) => match[1] ?? '')
  const [start, stop, limits] = blocks
  if (blocks.length !== 3 || start === undefined || stop === undefined || limits === undefined) {
    throw new Error(`"Without a cluster" has ${blocks.length} sh blocks, not 3`)
  }
  return { start, stop, limits }
}

/** The names and ports the steps use, fixed by the podman overlay. */
export const KUBE_PLAY = {
  volume: 'petstore-data',
  secret: 'petstore',
  api: 'http://127.0.0.1:18080',
  probes: 'http://127.0.0.1:18081',
  metrics: 'http://127.0.0.1:19464',
  label: 'app.kubernetes.io/name=petstore',
} as const

/**
 * A folder to run the steps in: `deploy` links to the clone's, and `bin` (first on the PATH the
 * steps get) holds this host's podman and, when kubectl is missing, a stand-in for it.
 */
export async function stepsFolder(folder: string, podmanPath: string): Promise<NodeJS.ProcessEnv> {
  symlinkSync(join(ROOT, 'deploy'), join(folder, 'deploy'))
  const bin = join(folder, 'bin')
  mkdirSync(bin)
  script(join(bin, 'podman'), `exec '${podmanPath}' ${GLOBAL.join(' ')} "$@"`)
  if ((await run('sh', ['-c', 'command -v kubectl'])).code !== 0) {
    const renderer = join(folder, 'kustomize.yaml.ts')
    writeFileSync(
      renderer,
      [
        `import { stringify } from '${import.meta.resolve('yaml')}'`,
        `import { render } from '${new URL('./kustomize.ts', import.meta.url).href}'`,
        "if (process.argv[2] !== 'kustomize') throw new Error('only kubectl kustomize DIR')",
        "process.stdout.write(render(process.argv[3]).map((m) => stringify(m)).join('---\\n'))",
      ].join('\n'),
    )
    script(join(bin, 'kubectl'), `exec '${process.execPath}' '${renderer}' "$@"`)
  }
  return { ...process.env, PATH: `${bin}:${process.env.PATH ?? ''}` }
}

function script(path: string, line: string): void {
  writeFileSync(path, `#!/bin/sh\n${line}\n`)
  chmodSync(path, 0o755)
}

/** One block, as written, by `sh -e` in the folder. */
export function runSteps(
  block: string,
  folder: string,
  env: NodeJS.ProcessEnv,
  timeoutMs = 180_000,
): Promise<Result> {
  return run('sh', ['-e', '-c', `cd '${folder}'\n${block}`], { env, timeoutMs })
}

/**
 * The overlays kubectl renders otherwise than kustomize.ts (compared as sets of objects);
 * undefined where kubectl is not installed.
 */
export async function kubectlDiffers(): Promise<string[] | undefined> {
  if ((await run('sh', ['-c', 'command -v kubectl'])).code !== 0) return undefined
  const differ: string[] = []
  for (const overlay of ['postgres', 'sqlite', 'podman']) {
    const folder = join(KUBERNETES, 'overlays', overlay)
    const theirs = await run('kubectl', ['kustomize', folder])
    const byName = (manifests: unknown[]) =>
      Object.fromEntries(
        manifests.map((m) => {
          const { kind, metadata } = m as { kind: string; metadata: { name: string } }
          return [`${kind}/${metadata.name}`, m]
        }),
      )
    const same = isDeepStrictEqual(byName(render(folder)), byName(parseYaml(theirs.stdout, folder)))
    if (theirs.code !== 0 || !same) differ.push(overlay)
  }
  return differ
}
