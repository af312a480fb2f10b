// Differential oracle: feed request objects (one JSON per stdin line, {request, defaults?}) through the
// published DeepSeekAdapter and print the exact body it would POST (one JSON line per input, or {"error"}).
// fetch is replaced so nothing leaves the machine; the captured body is the adapter's JSON.stringify output.
import { createInterface } from 'node:readline'
import { DeepSeekAdapter, DEFAULT_MAX_TOKENS } from '@deepseek-ai/dsh-llm-deepseek'

class Captured extends Error {
  constructor(body) { super('captured'); this.body = body }
}

globalThis.fetch = async (_url, init) => { throw new Captured(init.body) }

function adapterFor(defaults) {
  const connection = {
    baseURL: 'http://127.0.0.1:9',
    models: [],
    defaults,
    maxTokens: DEFAULT_MAX_TOKENS,
    defaultContextWindow: 1_000_000,
    streamIdleTimeoutMs: 60_000,
    maxRequestImageBytes: 1,
  }
  return new DeepSeekAdapter({
    options: () => connection,
    resolveApiKey: async () => 'sk-differential',
    resolveUserId: () => 'differential-user',
  })
}

async function bodyOf(request, defaults) {
  try {
    for await (const _chunk of adapterFor(defaults).stream(request)) { /* fetch throws first */ }
  } catch (error) {
    let cause = error
    while (cause !== undefined && !(cause instanceof Captured)) cause = cause.cause
    if (cause instanceof Captured) return cause.body
    return JSON.stringify({ error: String(error?.code ?? error?.message ?? error) })
  }
  return JSON.stringify({ error: 'adapter finished without calling fetch' })
}

const lines = createInterface({ input: process.stdin, crlfDelay: Infinity })
for await (const line of lines) {
  if (line.trim() === '') continue
  const { request, defaults = {} } = JSON.parse(line)
  process.stdout.write(`${await bodyOf(request, defaults)}\n`)
}
