// The state of the process's life that the app reads and the server sets: shared, mutable, one
// object per instance (D11).

export interface Lifecycle {
  /** Set on SIGTERM/SIGINT (D11): readiness fails so load balancers stop sending traffic. */
  draining: boolean
}
