// Writes the OpenAPI document the service serves at /v1/openapi.json to docs/openapi.json, so it
// can be linted, reviewed in diffs and published. It is generated from the route schemas; never
// edit docs/openapi.json by hand (test/openapi.test.ts fails when it is stale).
//
//   npm run openapi
import { writeFile } from 'node:fs/promises'
import { loadConfig } from '../src/config.ts'
import { composeApp } from '../src/process/compose.ts'
import { openSqliteStore } from '../src/store/sqlite/store.ts'

const target = new URL('../docs/openapi.json', import.meta.url)

const store = openSqliteStore({ path: ':memory:' })
await store.migrate()
// The default configuration: the document does not depend on any setting.
const app = await composeApp(loadConfig({}), store, { logger: false })
try {
  await app.ready()
  await writeFile(target, `${JSON.stringify(app.swagger(), null, 2)}\n`)
  process.stdout.write(`wrote ${target.pathname}\n`)
} finally {
  await app.close()
  await store.close()
}
