// The agent loop's request object without its live-only fields (sessionId, signal), serialized as the
// loop serializes it: the one definition shared by reconstruct.mjs and benchmarks/reference_bench.mjs.
export function requestBody(header, messages) {
  return JSON.stringify({
    ...header.config,
    messages,
    ...header.system !== undefined ? { system: header.system } : {},
    ...header.tools !== undefined ? { tools: header.tools } : {},
  })
}
