// D23: the module hooks through which instrumentations patch what the service imports (pg and
// ioredis are imported from ES modules, which require() hooks alone never see; Fastify's is a
// plugin the app registers). Imported first
// by start.ts, so they are in place before anything to trace is loaded. Synchronous, in-thread
// hooks (module.registerHooks, Node.js 24.11.1+ and 26): Node's off-thread module.register() is
// deprecated on 26. Only the modules instrumented are intercepted: every module intercepted is
// wrapped, and its callers pay for the wrapper on each call.
import { register } from 'import-in-the-middle/register-hooks.mjs'

register({ include: ['pg', 'pg-pool', 'ioredis'] })
