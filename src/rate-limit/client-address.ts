// D3, D8: the client's address, computed here for everything that names a client: the
// failed-authentication limit (http/plugins/auth.ts), the request log (http/plugins/request-log.ts),
// the log's request serializer (observability/logging.ts) and the server span
// (http/plugins/tracing.ts). It is Fastify's request.ip (the peer's, or behind the balancers named
// in PETSTORE_TRUSTED_PROXIES the first hop of X-Forwarded-For not among them) without the port
// some balancers write after it (`192.0.2.1:4711`, `[2001:db8::1]:4711`): a port belongs to a
// connection, not to a client, and counting it would give one client a new address for every
// connection. Here, below observability/ and http/, since both use it.
import { BlockList, isIPv4, isIPv6 } from 'node:net'

/** What carries request.ip: a Fastify request, or whatever a log serializer is given. */
export interface WithIp {
  readonly ip?: string | undefined
}

/** The client's address, without a port; undefined for a peer already gone. */
export function clientAddress(request: WithIp): string | undefined {
  const ip = request.ip
  return ip === undefined ? undefined : withoutPort(ip)
}

/**
 * An address as a balancer may write it, without its port: `a.b.c.d:port`, `[v6]:port` and
 * `[v6]`. A bare IPv6 address has colons and no port, so it is kept whole; so is anything else
 * that is not an address (counted as written, never as another client).
 */
export function withoutPort(address: string): string {
  const colon = address.indexOf(':')
  if (colon === -1) return address // IPv4 as it is: one scan, the common case
  if (address.charCodeAt(0) === OPEN_BRACKET) return unbracketed(address)
  if (address.indexOf(':', colon + 1) !== -1) return address // IPv6 has at least two
  const host = address.slice(0, colon)
  return PORT.test(address.slice(colon + 1)) && isIPv4(host) ? host : address
}

const OPEN_BRACKET = 0x5b
const PORT = /^\d{1,5}$/

/** `[v6]:port` or `[v6]` as `v6`; anything else as written. */
function unbracketed(address: string): string {
  const close = address.indexOf(']')
  const rest = address.slice(close + 1)
  const portOk = rest === '' || (rest.startsWith(':') && PORT.test(rest.slice(1)))
  const host = address.slice(1, close)
  return close !== -1 && portOk && isIPv6(host) ? host : address
}

/**
 * Fastify's trustProxy in its function form (Server.md, `trustProxy`): whether a hop of
 * X-Forwarded-For is one of the balancers named in PETSTORE_TRUSTED_PROXIES, its port set aside
 * as for the client, so that behind two balancers that write ports the walk back does not stop
 * at the inner one's `10.0.0.5:4711` and count every client as it. The entries are addresses and
 * CIDR ranges checked by config.ts, none trusting every address. As with proxy-addr, which
 * Fastify uses for a list: an IPv4 entry matches the IPv4-mapped form a dual-stack socket gives
 * (`::ffff:10.0.0.5`), and an entry with a zone (`fe80::1%eth0`) only a hop with that zone.
 */
export function trustedHops(entries: readonly string[]): (address: string | undefined) => boolean {
  const anyZone = new BlockList()
  const byZone = new Map<string, BlockList>()
  for (const entry of entries) {
    const [address = '', prefix] = entry.split('/')
    const [ip = '', zone] = address.split('%')
    let list = anyZone
    if (zone !== undefined) {
      list = byZone.get(zone) ?? new BlockList()
      byZone.set(zone, list)
    }
    const family = isIPv4(ip) ? 'ipv4' : 'ipv6'
    if (prefix === undefined) list.addAddress(ip, family)
    else list.addSubnet(ip, Number(prefix), family)
  }
  return function isTrustedHop(hop: string | undefined): boolean {
    // Fastify asks with the socket's remoteAddress, undefined once the peer has gone.
    if (typeof hop !== 'string') return false
    const address = withoutPort(hop)
    if (isIPv4(address)) return anyZone.check(address, 'ipv4')
    if (!isIPv6(address)) return false
    const [ip = '', zone] = address.split('%')
    const zoned = zone === undefined ? undefined : byZone.get(zone)
    return anyZone.check(ip, 'ipv6') || (zoned?.check(ip, 'ipv6') ?? false)
  }
}
