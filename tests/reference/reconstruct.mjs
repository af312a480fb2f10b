#!/usr/bin/env node
// Differential oracle for dsh-audit: run the PUBLISHED dsh reference packages over
// session logs and print, per log, one JSON line with the requests the reference
// rebuilds (sha256 of the JS request body) or the stage and message of its refusal.
//
//   node reconstruct.mjs [--bodies] [LOG ...]      (no LOG arguments: one path per stdin line)
//
// Stages, each done by reference code wherever the reference exposes it:
//   parse        committed snapshot form -> events: seq/time synthesized from position
//                (as upstream llm-replay's parseSessionLog does at the 0.1.1-rc.2 commit),
//                packed chunk rows expanded by dsh-session's decodeStorageRecord.
//   load         the events are written through the JSONL persistence backend into a
//                scratch root and loaded back through it (PersistenceCoordinator: version
//                and vocabulary refusals, legacy-shape upgrades, crash-repair closers,
//                Session.fromRestore validation).
//   reconstruct  dispatch points = first chunk of each request attempt, split by
//                llm-replay's deriveReplayScript; per point a fresh Session seeded with
//                events[0..B) gives deriveMessages() and requestHeader().
// Must run on Node >= 22 (the JSONL backend imports zstd from node:zlib): use
// node_modules/.bin/node, installed by install.sh.

import { createHash } from 'node:crypto'
import { requestBody } from './request-body.mjs'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { isAbsolute, join } from 'node:path'
import { createInterface } from 'node:readline'

if (Number(process.versions.node.split('.')[0]) < 22) {
  process.stderr.write(`reconstruct.mjs needs Node >= 22 (running ${process.version}); use node_modules/.bin/node\n`)
  process.exit(2)
}
// Loaded after the version check: the JSONL backend fails to link on older Node.
const { Context } = await import('@deepseek-ai/cordis')
const { deriveReplayScript } = await import('@deepseek-ai/dsh-llm-replay')
const { decodeStorageRecord, foldRequestHeader, Session, SessionStore } = await import('@deepseek-ai/dsh-session')
const { JsonlSessionPersistence } = await import('@deepseek-ai/dsh-session-persistence-jsonl')

const PACKED_ROW_TYPES = new Set(['text-chunks', 'reasoning-chunks', 'tool-call-chunks'])
// Absolute stand-in for the snapshot harness's "{{cwd}}" token: the session store
// requires an absolute header cwd, and no request body depends on it.
const CWD_STAND_IN = '/dsh-audit-cwd'

class StageError extends Error {
  constructor(stage, message) {
    super(message)
    this.stage = stage
  }
}

function errorMessage(error) {
  return error instanceof Error ? error.message : String(error)
}

/** Committed fixture text -> {header, events}; explicit seq/time are kept as written. */
function parseSnapshotLog(text) {
  let header
  const events = []
  for (const [index, line] of text.split(/\r?\n/).entries()) {
    if (line.trim().length === 0) continue
    let value
    try {
      value = JSON.parse(line)
    } catch (error) {
      throw new StageError('parse', `line ${index + 1} contains invalid JSON: ${errorMessage(error)}`)
    }
    if (value === null || typeof value !== 'object' || Array.isArray(value)) {
      throw new StageError('parse', `line ${index + 1} must be a JSON object`)
    }
    if (header === undefined) {
      header = value
      continue
    }
    const packed = PACKED_ROW_TYPES.has(value.type)
    const seqKey = packed ? 'seq0' : 'seq'
    const timeKey = packed ? 'time0' : 'time'
    if (!Object.hasOwn(value, seqKey)) value[seqKey] = events.length
    if (!Object.hasOwn(value, timeKey)) value[timeKey] = 0
    try {
      events.push(...decodeStorageRecord(value))
    } catch (error) {
      throw new StageError('parse', `line ${index + 1}: ${errorMessage(error)}`)
    }
  }
  if (header === undefined) throw new StageError('parse', 'log is empty (no session header line)')
  return { header, events }
}

/**
 * Header line -> SessionHeader for the store. Only the snapshot harness's normalization
 * artifacts are repaired (placeholder cwd, absent version/delegationDepth of hand-authored
 * fixtures); everything else reaches the reference validators unchanged.
 */
function storeMeta(header) {
  const { type: _type, ...meta } = header
  const defaults = []
  if (!Object.hasOwn(meta, 'version')) {
    meta.version = 0
    defaults.push('version=0')
  }
  if (!Object.hasOwn(meta, 'delegationDepth')) {
    meta.delegationDepth = 0
    defaults.push('delegationDepth=0')
  }
  if (typeof meta.cwd === 'string' && meta.cwd.startsWith('{{cwd}}')) {
    meta.cwd = CWD_STAND_IN + meta.cwd.slice('{{cwd}}'.length)
    defaults.push('cwd:{{cwd}}->' + CWD_STAND_IN)
  }
  return { meta, defaults }
}

/** Write through the reference JSONL backend and read back through its load path. */
async function loadThroughPersistence(meta, events) {
  if (events.length === 0) {
    // The backend materializes a log on its first append, so a header-only log has no
    // stored form to load; restore-validate its header directly instead.
    const session = Session.fromRestore(meta.id, [], structuredClone(meta))
    return { meta: session.header, events: [] }
  }
  const root = mkdtempSync(join(tmpdir(), 'dsh-ref-'))
  const ctx = new Context()
  const fibers = [ctx.plugin(SessionStore), ctx.plugin(JsonlSessionPersistence, { root, compression: 'none' })]
  try {
    for (const fiber of fibers) await fiber // plugins start asynchronously
    const persistence = ctx.sessionPersistence
    await persistence.create(meta)
    await persistence.append(meta.id, events)
    return await persistence.load(meta.id)
  } finally {
    for (const fiber of fibers.reverse()) await fiber.dispose()
    rmSync(root, { recursive: true, force: true })
  }
}

/**
 * Seqs of each attempt's first assistant/chunk, split by the reference replay harness
 * (deriveReplayScript keeps the logged chunk objects, so identity maps them back).
 * Compaction one-shots it synthesizes have no logged chunk and are skipped.
 */
function replaySplit(events) {
  const seqOfChunk = new Map()
  for (const event of events) {
    if (event.type === 'assistant/chunk') seqOfChunk.set(event.data.chunk, event.seq)
  }
  const seqs = []
  for (const entry of deriveReplayScript(events)) {
    const seq = entry.kind === 'chunks' ? seqOfChunk.get(entry.chunks[0]) : undefined
    if (seq !== undefined) seqs.push(seq)
  }
  return seqs
}

/**
 * The same boundaries by the rule the agent loop implies (spec 6.1): an attempt ends at
 * its finish chunk, at a turn/step change, or at an assistant/message (a cancelled
 * stream, which deriveReplayScript refuses because it cannot replay it).
 */
function loopSplit(events) {
  const seqs = []
  let open
  for (const event of events) {
    if (event.type === 'assistant/message') open = undefined
    if (event.type !== 'assistant/chunk') continue
    const key = `${event.data.turn}/${event.data.step}`
    if (open !== key) seqs.push(event.seq)
    open = event.data.chunk.type === 'finish' ? undefined : key
  }
  return seqs
}

/** Dispatch seqs plus a note when the two splits disagree or the replay split refuses. */
function dispatchSeqs(events) {
  const byLoop = loopSplit(events)
  let byReplay
  try {
    byReplay = replaySplit(events)
  } catch (error) {
    return { seqs: byLoop, note: `loop split used; deriveReplayScript refused: ${errorMessage(error)}` }
  }
  if (JSON.stringify(byReplay) === JSON.stringify(byLoop)) return { seqs: byReplay }
  return { seqs: byReplay, note: `deriveReplayScript split ${JSON.stringify(byReplay)} differs from loop split ${JSON.stringify(byLoop)}` }
}

function lastHeaderSeq(prefix) {
  for (let i = prefix.length - 1; i >= 0; i--) if (prefix[i].type === 'request/header') return prefix[i].seq
  return null
}


function rebuildRequests(id, meta, events, withBodies) {
  const attempts = new Map()
  const requests = []
  const { seqs, note } = dispatchSeqs(events)
  for (const seq of seqs) {
    const prefix = events.slice(0, seq)
    let session
    try {
      session = Session.create(id, prefix, meta)
    } catch (error) {
      throw new StageError('reconstruct', `seeding events[0..${seq}): ${errorMessage(error)}`)
    }
    const header = session.requestHeader()
    if (header === undefined) throw new StageError('reconstruct', `no request/header before dispatch seq ${seq}`)
    if (JSON.stringify(header) !== JSON.stringify(foldRequestHeader(prefix))) {
      throw new StageError('reconstruct', `session.requestHeader() disagrees with foldRequestHeader at seq ${seq}`)
    }
    const { turn, step } = events[seq].data
    const key = `${turn}/${step}`
    const attempt = (attempts.get(key) ?? 0) + 1
    attempts.set(key, attempt)
    const body = requestBody(header, session.deriveMessages())
    const bytes = Buffer.from(body, 'utf8')
    requests.push({
      turn,
      step,
      attempt,
      dispatchSeq: seq,
      headerSeq: lastHeaderSeq(prefix),
      sha256: createHash('sha256').update(bytes).digest('hex'),
      length: bytes.length,
      ...withBodies ? { body } : {},
    })
  }
  return { requests, ...note === undefined ? {} : { splitNote: note } }
}

async function processLog(path, withBodies) {
  let text
  try {
    text = readFileSync(path, 'utf8')
  } catch (error) {
    return { path, ok: false, stage: 'parse', error: errorMessage(error) }
  }
  try {
    const { header, events } = parseSnapshotLog(text)
    const { meta, defaults } = storeMeta(header)
    let loaded
    try {
      loaded = await loadThroughPersistence(meta, events)
    } catch (error) {
      throw new StageError('load', errorMessage(error))
    }
    const rebuilt = rebuildRequests(String(meta.id), loaded.meta, loaded.events, withBodies)
    return {
      path,
      ok: true,
      ...defaults.length > 0 ? { headerDefaults: defaults } : {},
      events: loaded.events.length,
      ...rebuilt,
    }
  } catch (error) {
    if (error instanceof StageError) return { path, ok: false, stage: error.stage, error: error.message }
    return { path, ok: false, stage: 'reconstruct', error: `harness failure: ${errorMessage(error)}` }
  }
}

async function readStdinPaths() {
  const paths = []
  for await (const line of createInterface({ input: process.stdin })) {
    if (line.trim().length > 0) paths.push(line.trim())
  }
  return paths
}

async function main() {
  const args = process.argv.slice(2)
  const withBodies = args.includes('--bodies')
  const positional = args.filter(arg => arg !== '--bodies')
  const paths = positional.length > 0 ? positional : await readStdinPaths()
  for (const path of paths) {
    const result = await processLog(isAbsolute(path) ? path : join(process.cwd(), path), withBodies)
    process.stdout.write(JSON.stringify({ ...result, path }) + '\n')
  }
}

await main()
