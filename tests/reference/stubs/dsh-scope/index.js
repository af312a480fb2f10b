// Stand-in for @deepseek-ai/dsh-scope (not published at 0.1.1-rc.2).
// dsh-session imports only these two names and calls them only when a Session
// is entered into a live SessionStore, which the differential harness never does.
// The harness runs unscoped, so a context carries no scope key and a dispatch
// target is the subject itself (its own event filter, if any, still applies).

/** Scope key of a context: always absent here (unscoped harness). */
export function scopeOf(_ctx) {
  return undefined
}

/** Dispatch receiver for a subject; only the unscoped case is supported. */
export function scopeTarget(base, key) {
  if (key !== undefined) throw new Error('dsh-scope stand-in: scoped dispatch is not supported')
  return base
}
