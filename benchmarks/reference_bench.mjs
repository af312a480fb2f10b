#!/usr/bin/env node
// Time the published dsh reference packages rebuilding every request of one log.
//
//   node reference_bench.mjs parse|incremental|fresh LOG [--timeout SECONDS]
//
// Modes (run with tests/reference/node_modules/.bin/node, the pinned Node 22):
//   parse        stream the log, JSON.parse every line, expand packed rows with the reference's
//                decodeStorageRecord: the reference's own parse floor.
//   incremental  one Session, every event appended through Session.append as the live loop writes
//                it; at each dispatch point (first chunk of a request attempt) requestHeader() +
//                deriveMessages() + JSON.stringify of the request object + sha256. Session caches the
//                header fold and the derived messages, so this is the reference's best case.
//   fresh        at each dispatch point a new Session seeded with events[0..B), as the reference's
//                own reconstruction test (tests/reference/reconstruct.mjs) does: O(requests x log).
// --timeout stops the rebuilding (not the counting) after that many seconds; the rest of the log is
// then only parsed, and the total is EXTRAPOLATED: fresh by the seeded prefix lengths still to do
// (its cost is linear in them), incremental by the events still to append.
// Prints one JSON line. The persistence-backend round trip of reconstruct.mjs is left out: it is a
// one-off load cost, not the reconstruction.

import { createHash } from 'node:crypto'
import { requestBody } from '../tests/reference/request-body.mjs'
import { closeSync, openSync, readSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'

const here = dirname(fileURLToPath(import.meta.url))
const sessionLib = join(here, '..', 'tests', 'reference', 'node_modules', '@deepseek-ai', 'dsh-session', 'lib', 'index.js')
const { decodeStorageRecord, Session } = await import(pathToFileURL(sessionLib).href)

const PACKED_ROW_TYPES = new Set(['text-chunks', 'reasoning-chunks', 'tool-call-chunks'])
const BLOCK = 16 << 20

function usage(message) {
  process.stderr.write(`reference_bench.mjs: ${message}\nusage: node reference_bench.mjs parse|incremental|fresh LOG [--timeout SECONDS]\n`)
  process.exit(2)
}

/** Lines of a file as strings, read in blocks: a 1 GB log exceeds V8's maximum string length. */
function* lines(path) {
  const fd = openSync(path, 'r')
  try {
    const block = Buffer.allocUnsafe(BLOCK)
    let tail = Buffer.alloc(0)
    for (;;) {
      const n = readSync(fd, block, 0, BLOCK, null)
      if (n === 0) break
      const buf = tail.length > 0 ? Buffer.concat([tail, block.subarray(0, n)]) : block.subarray(0, n)
      let start = 0
      for (let nl = buf.indexOf(10, start); nl !== -1; nl = buf.indexOf(10, start)) {
        yield buf.toString('utf8', start, nl)
        start = nl + 1
      }
      tail = Buffer.from(buf.subarray(start)) // copy: the block is reused
    }
    if (tail.length > 0) yield tail.toString('utf8')
  } finally {
    closeSync(fd)
  }
}

/** {meta, events} as a generator of decoded events after the header (seq/time synthesized when absent). */
function* events(path, state) {
  let count = 0
  for (const line of lines(path)) {
    state.bytes += Buffer.byteLength(line) + 1
    if (line.trim().length === 0) continue
    const value = JSON.parse(line)
    if (state.meta === undefined) {
      const { type: _type, ...meta } = value
      state.meta = meta
      continue
    }
    const packed = PACKED_ROW_TYPES.has(value.type)
    const seqKey = packed ? 'seq0' : 'seq'
    if (!Object.hasOwn(value, seqKey)) value[seqKey] = count
    const timeKey = packed ? 'time0' : 'time'
    if (!Object.hasOwn(value, timeKey)) value[timeKey] = 0
    for (const event of decodeStorageRecord(value)) {
      count++
      yield event
    }
  }
}


/** Dispatch-point detector: first chunk of each attempt (an attempt ends at finish, step change, message). */
function dispatchDetector() {
  let open
  return event => {
    if (event.type === 'assistant/message') open = undefined
    if (event.type !== 'assistant/chunk') return false
    const key = `${event.data.turn}/${event.data.step}`
    const isDispatch = key !== open
    open = event.data.chunk.type === 'finish' ? undefined : key
    return isDispatch
  }
}

function digest(session, out) {
  const header = session.requestHeader()
  if (header === undefined) throw new Error(`no request/header before seq ${session.seq}`)
  const bytes = Buffer.from(requestBody(header, session.deriveMessages()), 'utf8')
  out.hashes.update(createHash('sha256').update(bytes).digest('hex') + '\n')
  out.bodyBytes += bytes.length
}

function run(mode, path, timeoutSeconds) {
  const state = { meta: undefined, bytes: 0 }
  const out = { mode, log: path, events: 0, requestsTotal: 0, requestsDone: 0, bodyBytes: 0, completed: true }
  // sha256 over the done requests' hex digests, one per line: compared with dsh-audit's by the runner.
  out.hashes = createHash('sha256')
  const started = performance.now()
  const deadline = started + timeoutSeconds * 1000
  const isDispatch = dispatchDetector()
  let session
  let rebuildMs = 0
  let eventsDone = 0
  let prefixDone = 0
  let prefixTotal = 0
  const kept = []
  for (const event of events(path, state)) {
    out.events++
    if (mode === 'parse') continue
    const dispatch = isDispatch(event)
    if (dispatch) {
      out.requestsTotal++
      prefixTotal += event.seq
    }
    if (!out.completed) continue
    if (performance.now() > deadline) {
      out.completed = false
      kept.length = 0
      continue
    }
    const t0 = performance.now()
    if (mode === 'incremental') {
      session ??= Session.create(String(state.meta.id), undefined, state.meta)
      if (dispatch) {
        digest(session, out)
        out.requestsDone++
      }
      const opts = {}
      if (event.sourceEventSeqs !== undefined) opts.sourceEventSeqs = event.sourceEventSeqs
      if (event.surfaceOp !== undefined) opts.surfaceOp = event.surfaceOp
      session.append(event.type, event.data, opts)
      eventsDone++
    } else {
      if (dispatch) {
        digest(Session.create(String(state.meta.id), kept.slice(0, event.seq), state.meta), out)
        out.requestsDone++
        prefixDone += event.seq
      }
      kept.push(event)
    }
    rebuildMs += performance.now() - t0
  }
  out.bytes = state.bytes
  out.wallSeconds = (performance.now() - started) / 1000
  out.rebuildSeconds = rebuildMs / 1000
  if (!out.completed) {
    const fraction = mode === 'fresh' ? prefixDone / prefixTotal : eventsDone / out.events
    out.extrapolatedRebuildSeconds = out.rebuildSeconds / fraction
    out.extrapolatedBasis = mode === 'fresh' ? 'seeded prefix events' : 'appended events'
  }
  out.hashes = out.hashes.digest('hex')
  out.peakRssMiB = process.resourceUsage().maxRSS / 1024
  out.node = process.version
  return out
}

const args = process.argv.slice(2)
let timeoutSeconds = Infinity
const at = args.indexOf('--timeout')
if (at !== -1) {
  timeoutSeconds = Number(args[at + 1])
  if (!(timeoutSeconds > 0)) usage(`bad --timeout ${args[at + 1]}`)
  args.splice(at, 2)
}
const [mode, path] = args
if (!['parse', 'incremental', 'fresh'].includes(mode) || path === undefined) usage('need a mode and a LOG')
process.stdout.write(JSON.stringify(run(mode, path, timeoutSeconds)) + '\n')
