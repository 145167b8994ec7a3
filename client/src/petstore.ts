// The client: `new Petstore({ baseUrl, apiKey })`, and its `pets` operations.
import type { NewPet, Pet, PetStatus } from './contract.ts'
import { noticeDeprecation } from './deprecation.ts'
import { PetstoreError } from './errors.ts'
import { nextLink } from './link.ts'
import { responseInfo, type WithResponse } from './response.ts'
import { type Sleep, sleep } from './retry.ts'
import { type Answer, type Fetch, send, type Transport } from './transport.ts'

export interface PetstoreOptions {
  /** The service's base address, ending in `/v1`, e.g. `https://petstore.example.com/v1`. */
  baseUrl: string
  /** The API key. `undefined` is accepted so that `process.env.…` type-checks; it throws. */
  apiKey: string | undefined
  /**
   * Lets a plain `http:` `baseUrl` name a host other than this machine's loopback, which the
   * constructor otherwise refuses: every request carries the API key, and over plain http
   * anyone on the way can read it and use it. `https:` is always accepted, and so is `http:` to
   * `localhost`, `127.0.0.0/8` and `[::1]`; give `true` only for a network you trust (a
   * container's or a test's). `false` by default.
   */
  allowInsecureHttp?: boolean | undefined
  /** The `fetch` to call; the platform's by default. */
  fetch?: Fetch | undefined
  /** Retries after a failed first attempt (network error, timeout, 429, 503, 409 in use); 2. */
  maxRetries?: number | undefined
  /** Each attempt's limit, from sending to the last byte of the answer, in ms; 10 000. */
  timeoutMs?: number | undefined
  /** Sent as `User-Agent` (not in browsers, which do not allow it); none by default. */
  userAgent?: string | undefined
  /** The longest wait before a retry, in ms, `Retry-After` included; 30 000. */
  maxRetryDelayMs?: number | undefined
  /** The first retry's backoff ceiling, in ms, doubled for each next one; 500. */
  retryBaseDelayMs?: number | undefined
  /** For tests: how to wait before a retry (resolve after `ms`, reject when `signal` aborts). */
  sleep?: Sleep | undefined
  /** For tests: the jitter's random source, a number in [0, 1); Math.random by default. */
  random?: (() => number) | undefined
}

/** Every operation takes these as its last argument. */
export interface CallOptions {
  /** Aborting it cancels the attempt under way and any wait before a retry. */
  signal?: AbortSignal | undefined
  /**
   * A W3C Trace Context `traceparent` (`00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>`),
   * sent with every attempt of the call, so that the service's log line of the request (and its
   * trace, where the service traces) joins the caller's trace. With OpenTelemetry:
   * `propagation.inject(context.active(), carrier)`, then `carrier.traceparent`. With a malformed
   * one the call fails with a TypeError before anything is sent.
   */
  traceparent?: string | undefined
  /** The W3C `tracestate` that goes with `traceparent` (up to 512 visible ASCII characters). */
  tracestate?: string | undefined
  /**
   * Sent as the `Prefer` field (RFC 7240) with every attempt of the call, retries included.
   * A staging deployment of the service (`PETSTORE_ENV=staging`) answers `code=<status>` with
   * that documented error, as for real (`Retry-After` and all), and holds its answer for
   * `delay=<ms>` (0–10000); e.g. `{ prefer: 'code=503' }` shows the retries at work. Production
   * ignores it. The service's docs/api.md, "Testing your client against staging", lists the
   * statuses each operation may rehearse. It must be 1 to 512 characters of visible ASCII,
   * spaces and tabs, not only white space: anything else (a CR or LF included) fails the call
   * with a TypeError before anything is sent.
   */
  prefer?: string | undefined
}

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}$/
const ALL_ZEROS = /^0+$/
const TRACESTATE = /^[\x20-\x7e]{1,512}$/
/** A field value (RFC 9110 §5.5) kept to visible ASCII, spaces and tabs: no CR, LF or other controls. */
const PREFER = /^[\t\x20-\x7e]{1,512}$/

/** The headers a call's options add to each of its attempts, checked. */
function callHeaders(options: CallOptions): Record<string, string> {
  return { ...traceHeaders(options), ...preferHeader(options) }
}

/** `Prefer`, when given: a checked field value, sent as it is. */
function preferHeader({ prefer }: CallOptions): Record<string, string> {
  if (prefer === undefined) return {}
  if (typeof prefer !== 'string' || !PREFER.test(prefer) || prefer.trim() === '') {
    throw new TypeError(
      'Petstore: prefer must be 1 to 512 characters of visible ASCII, spaces and tabs, not only white space, and no CR or LF (an RFC 7240 Prefer field, e.g. code=503 or delay=200)',
    )
  }
  return { prefer }
}

/** The trace headers of a call: none, or a checked `traceparent` and its `tracestate`. */
function traceHeaders({ traceparent, tracestate }: CallOptions): Record<string, string> {
  if (traceparent === undefined) {
    if (tracestate !== undefined) {
      throw new TypeError('Petstore: tracestate is sent only with a traceparent')
    }
    return {}
  }
  const ids = TRACEPARENT.exec(traceparent)
  if (ids === null || ALL_ZEROS.test(ids[1] ?? '') || ALL_ZEROS.test(ids[2] ?? '')) {
    throw new TypeError(
      'Petstore: traceparent must be 00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>, lower case, the ids not all zeros (W3C Trace Context)',
    )
  }
  if (tracestate === undefined) return { traceparent }
  if (!TRACESTATE.test(tracestate)) {
    throw new TypeError('Petstore: tracestate must be 1 to 512 visible ASCII characters')
  }
  return { traceparent, tracestate }
}

export interface CreateOptions extends CallOptions {
  /**
   * The `Idempotency-Key` (1–255 visible ASCII characters). A new random UUID per call unless
   * given: give your own to make a create safe across restarts of your program too.
   */
  idempotencyKey?: string | undefined
}

export interface ListPetsParams {
  status?: PetStatus | undefined
  /** Pets per page (1–100; the service's default is 20). */
  limit?: number | undefined
}

export interface ListPageParams extends ListPetsParams {
  /** Where the page starts: a previous page's `nextCursor`. */
  cursor?: string | undefined
}

export interface PetPage {
  pets: Pet[]
  /** Present when more pets follow: pass it as `cursor` for the next page. */
  nextCursor?: string
}

const DEFAULTS = {
  maxRetries: 2,
  timeoutMs: 10_000,
  maxRetryDelayMs: 30_000,
  retryBaseDelayMs: 500,
}

export class Petstore {
  readonly pets: Pets

  constructor(options: PetstoreOptions) {
    const base = baseAddress(options.baseUrl)
    if (
      base.protocol === 'http:' &&
      !isLoopback(base.hostname) &&
      options.allowInsecureHttp !== true
    ) {
      throw new TypeError(
        `Petstore: baseUrl is plain http to ${base.host}, which is not this machine (localhost, 127.0.0.0/8, [::1]): the API key would cross the network unencrypted, readable by anyone on the way; use https, or pass allowInsecureHttp: true to send it anyway`,
      )
    }
    if (typeof options.apiKey !== 'string' || options.apiKey.trim() === '') {
      throw new TypeError(
        'Petstore: apiKey is missing or empty; pass the API key the service issued (petstore keys create)',
      )
    }
    const maxRetries = options.maxRetries ?? DEFAULTS.maxRetries
    const timeoutMs = options.timeoutMs ?? DEFAULTS.timeoutMs
    const maxDelayMs = options.maxRetryDelayMs ?? DEFAULTS.maxRetryDelayMs
    const baseDelayMs = options.retryBaseDelayMs ?? DEFAULTS.retryBaseDelayMs
    requireNumber('maxRetries', maxRetries, 0, Number.isInteger)
    requireNumber('timeoutMs', timeoutMs, 1)
    requireNumber('maxRetryDelayMs', maxDelayMs, 0)
    requireNumber('retryBaseDelayMs', baseDelayMs, 0)
    const transport: Transport = {
      apiKey: options.apiKey,
      // Called as a plain function: a browser's fetch throws when called as another object's method.
      fetch: options.fetch ?? ((url, init) => globalThis.fetch(url, init)),
      timeoutMs,
      userAgent: options.userAgent,
      retry: { maxRetries, baseDelayMs, maxDelayMs, random: options.random ?? Math.random },
      sleep: options.sleep ?? sleep,
    }
    this.pets = new Pets(transport, base)
  }
}

/** Said with getPet's deprecation warning: what to call instead. */
const GET_PET_ADVICE = 'Keep the pet pets.create returns, or find it with pets.list.'

/** The `pets` operations of a {@link Petstore}. */
export class Pets {
  /**
   * The same operations, each giving `{ data, response }`: the value the plain call gives, and
   * what the service said beside it (request id, budget, deprecation, replay, preference).
   */
  readonly withResponse: PetsWithResponse
  readonly #calls: PetsCalls

  constructor(transport: Transport, base: URL) {
    this.#calls = new PetsCalls(transport, base)
    this.withResponse = new PetsWithResponse(this.#calls)
  }

  /**
   * Every pet (of `status`, if given), page after page: it follows each page's
   * `Link: rel="next"` until none is left, and yields each pet once, in ascending `id` order.
   */
  async *list(params: ListPetsParams = {}, options: CallOptions = {}): AsyncGenerator<Pet, void> {
    for await (const page of this.#calls.pages(params, options)) yield* page.data.pets
  }

  /** One page of pets, and the cursor of the next when more follow. */
  async listPage(params: ListPageParams = {}, options: CallOptions = {}): Promise<PetPage> {
    return (await this.#calls.listPage(params, options)).data
  }

  /**
   * Adds a pet. It always sends an `Idempotency-Key`, the same on every retry, so a create
   * retried after a lost answer replays the first instead of making a second pet.
   */
  async create(pet: NewPet, options: CreateOptions = {}): Promise<Pet> {
    return (await this.#calls.create(pet, options)).data
  }

  /**
   * One pet by its id.
   *
   * @deprecated The service's getPet is deprecated and reaches its sunset on
   * Thu, 05 Dec 2030 00:00:00 GMT (`GET_PET_SUNSET`), after which this fails with 410 `gone`.
   * Keep the pet `create` returns, or find it with `list`.
   */
  async get(id: number, options: CallOptions = {}): Promise<Pet> {
    return (await this.#calls.get(id, options)).data
  }
}

/**
 * `pets.withResponse`: each operation's value as `data`, beside `response`, the answer's
 * metadata parsed ({@link ResponseInfo}). Errors are thrown as the plain calls throw them.
 */
export class PetsWithResponse {
  readonly #calls: PetsCalls

  constructor(calls: PetsCalls) {
    this.#calls = calls
  }

  /** Every page of pets (of `status`, if given), each with the metadata of its answer. */
  pages(
    params: ListPetsParams = {},
    options: CallOptions = {},
  ): AsyncGenerator<WithResponse<PetPage>, void> {
    return this.#calls.pages(params, options)
  }

  listPage(params: ListPageParams = {}, options: CallOptions = {}): Promise<WithResponse<PetPage>> {
    return this.#calls.listPage(params, options)
  }

  create(pet: NewPet, options: CreateOptions = {}): Promise<WithResponse<Pet>> {
    return this.#calls.create(pet, options)
  }

  /**
   * @deprecated The service's getPet is deprecated and reaches its sunset on
   * Thu, 05 Dec 2030 00:00:00 GMT (`GET_PET_SUNSET`); `response.sunset` says it too.
   */
  get(id: number, options: CallOptions = {}): Promise<WithResponse<Pet>> {
    return this.#calls.get(id, options)
  }
}

/** The operations themselves, each giving its value with the answer's metadata. */
class PetsCalls {
  readonly #transport: Transport
  readonly #base: URL

  constructor(transport: Transport, base: URL) {
    this.#transport = transport
    this.#base = base
  }

  async *pages(
    params: ListPetsParams,
    options: CallOptions,
  ): AsyncGenerator<WithResponse<PetPage>, void> {
    let url: URL | undefined = this.#listUrl(params)
    while (url !== undefined) {
      const answer = await this.#get(url, options)
      // A page whose next link is refused is still yielded, then the refusal thrown.
      const next = linkOrRefusal(() => this.#next(answer))
      const link = next instanceof PetstoreError ? undefined : next
      yield withResponse(answer, page(answer, link))
      if (next instanceof PetstoreError) throw next
      url = link
    }
  }

  async listPage(params: ListPageParams, options: CallOptions): Promise<WithResponse<PetPage>> {
    const answer = await this.#get(this.#listUrl(params), options)
    return withResponse(answer, page(answer, this.#next(answer)))
  }

  async create(pet: NewPet, options: CreateOptions): Promise<WithResponse<Pet>> {
    const answer = await send(this.#transport, {
      method: 'POST',
      url: new URL('pets', this.#base),
      body: pet,
      headers: {
        'idempotency-key': options.idempotencyKey ?? crypto.randomUUID(),
        ...callHeaders(options),
      },
      signal: options.signal,
    })
    return withResponse(answer, onePet(answer))
  }

  async get(id: number, options: CallOptions): Promise<WithResponse<Pet>> {
    const url = new URL(`pets/${encodeURIComponent(String(id))}`, this.#base)
    const answer = await this.#get(url, options)
    const result = withResponse(answer, onePet(answer))
    noticeDeprecation('getPet (pets.get)', GET_PET_ADVICE, result.response)
    return result
  }

  #get(url: URL, options: CallOptions): Promise<Answer> {
    return send(this.#transport, {
      method: 'GET',
      url,
      headers: callHeaders(options),
      signal: options.signal,
    })
  }

  #listUrl(params: ListPageParams): URL {
    const url = new URL('pets', this.#base)
    if (params.limit !== undefined) url.searchParams.set('limit', String(params.limit))
    if (params.status !== undefined) url.searchParams.set('status', params.status)
    if (params.cursor !== undefined) url.searchParams.set('cursor', params.cursor)
    return url
  }

  /**
   * The next page's address from the answer's `Link`. The API key goes with every request, so
   * a link that leaves the base address is refused rather than followed.
   */
  #next(answer: Answer): URL | undefined {
    let next: URL | undefined
    try {
      next = nextLink(answer.headers.get('link'), answer.url)
    } catch {
      throw badLink(answer, 'is not a valid URL')
    }
    if (next === undefined || next.href.startsWith(this.#base.href)) return next
    throw badLink(answer, `is not under ${this.#base.href}; it was not followed`)
  }
}

function linkOrRefusal(next: () => URL | undefined): URL | undefined | PetstoreError {
  try {
    return next()
  } catch (err) {
    if (err instanceof PetstoreError) return err
    throw err
  }
}

function withResponse<T>(answer: Answer, data: T): WithResponse<T> {
  return { data, response: responseInfo(answer) }
}

/** A list answer as a page: its pets, and the next page's cursor when one follows. */
function page(answer: Answer, next: URL | undefined): PetPage {
  const cursor = next?.searchParams.get('cursor')
  return cursor ? { pets: pets(answer), nextCursor: cursor } : { pets: pets(answer) }
}

/** `baseUrl` as a URL ending in `/v1/`, so that `pets` resolves under it. */
function baseAddress(baseUrl: string): URL {
  let url: URL
  try {
    url = new URL(baseUrl)
  } catch {
    throw new TypeError(`Petstore: baseUrl is not an absolute URL: ${baseUrl}`)
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new TypeError(`Petstore: baseUrl must be http: or https:, not ${url.protocol}`)
  }
  if (!/\/v1\/?$/.test(url.pathname) || url.search !== '' || url.hash !== '') {
    throw new TypeError(
      `Petstore: baseUrl must be the API's base address, ending in /v1 (e.g. https://petstore.example.com/v1), not ${baseUrl}`,
    )
  }
  if (!url.pathname.endsWith('/')) url.pathname += '/'
  return url
}

/**
 * Whether `hostname` (a URL's, so IPv4 in dotted decimal and IPv6 in brackets, compressed) is
 * this machine's loopback: `localhost`, `127.0.0.0/8` or `[::1]`. Not `*.localhost`: RFC 6761
 * asks resolvers to keep those names on loopback, but Node.js asks the system's resolver, which
 * may send them to DNS, and DNS may answer with any address.
 */
function isLoopback(hostname: string): boolean {
  return hostname === 'localhost' || hostname === '[::1]' || /^127\.\d+\.\d+\.\d+$/.test(hostname)
}

function requireNumber(
  name: string,
  value: number,
  minimum: number,
  check: (value: number) => boolean = Number.isFinite,
): void {
  if (typeof value !== 'number' || !check(value) || value < minimum) {
    throw new TypeError(`Petstore: ${name} must be a number of at least ${minimum}, not ${value}`)
  }
}

function pets(answer: Answer): Pet[] {
  if (!Array.isArray(answer.body)) throw notAs(answer, 'an array of pets')
  return answer.body as Pet[]
}

function onePet(answer: Answer): Pet {
  const body = answer.body
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw notAs(answer, 'a pet')
  }
  return body as Pet
}

function notAs(answer: Answer, what: string): PetstoreError {
  return new PetstoreError({
    status: answer.status,
    code: 'invalid_response',
    message: `${answer.url.origin}${answer.url.pathname} answered HTTP ${answer.status} with JSON that is not ${what}`,
    requestId: answer.headers.get('x-request-id') ?? undefined,
  })
}

function badLink(answer: Answer, what: string): PetstoreError {
  return new PetstoreError({
    status: answer.status,
    code: 'invalid_response',
    message: `the next page's link (Link: rel="next") ${what}`,
    requestId: answer.headers.get('x-request-id') ?? undefined,
  })
}
