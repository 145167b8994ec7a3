// `petstore pets --help`, apart from the command (pets.ts) so that the help does not load the
// client SDK and the schemas the command needs.

export const PETS_HELP = `Usage: petstore pets list [--status S] [--limit N] [--all] [--json] [--trace]
       petstore pets add --name NAME --category-id ID [--status S] [--idempotency-key K] [--json] [--trace]
       petstore pets get ID [--json] [--trace]

Calls a running service's API with the client SDK (petstore-client): a smoke test of any
deployment, from anywhere that reaches it.

  list                   the first page of pets, or every page with --all (followed by their
                         Link: rel="next"); --status: only available, pending or sold; --limit:
                         pets per page, 1 to 100 (the service's default is 20)
  add                    add a pet and print it. Retried after a lost answer, it still makes one
                         pet: the Idempotency-Key is new per command unless --idempotency-key
                         gives it (give the same key to repeat a create safely)
  get ID                 one pet (getPet: deprecated, removed on 5 December 2030)

Options:
  --url URL              the service's base address, ending in /v1
                         (default: PETSTORE_URL), e.g. http://127.0.0.1:8080/v1; plain http
                         only to this machine (localhost, 127.0.0.0/8, [::1])
  --key -                the API key from standard input (its first line) instead of
                         PETSTORE_API_KEY, e.g. from a password manager through a pipe
  --key KEY              the API key itself. It shows in the process list and the shell
                         history, and a warning says so: prefer PETSTORE_API_KEY or --key -
  --allow-insecure-http  let --url be plain http to another machine: the key then crosses the
                         network unencrypted
  --json                 one JSON object per line instead of a table
  --trace                send a new W3C traceparent with the command's requests and print its
                         trace id on stderr ("trace <id>"): the service logs it as traceId
  -h, --help             this help

Network errors, timeouts, 429 and 503 are retried twice, waiting as Retry-After asks (up to 30 s).
A failure is one line with the service's request id, and exit code 1.`
