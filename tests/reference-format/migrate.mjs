#!/usr/bin/env node
// Official-code differential oracle: turn realized v0 dsh session logs into v1, v2 and v3 logs
// with the PUBLISHED format-migration packages (docs/official-migration.md).
//
//   node migrate.mjs [--descriptor-bump] [--out-dir DIR [--root ROOT]] [LOG ...]   (no LOG: one path per stdin line)
//
// Each LOG (e.g. session.1.jsonl) gets session.1.v1.jsonl, .v2 and .v3 beside it, as dsh publishes a
// successor generation beside its predecessor; --out-dir writes them to DIR/<LOG's dir relative to ROOT>
// instead (ROOT defaults to LOG's own dir). One JSON line per log and target, in input order:
//   {"path", "target": 1|2|3, "ok": true, "file"}  or  {"path", "target", "ok": false, "error", "errorName", "hop"}
// Hop 1 (v0->v1, v0->v2) is an official catalog restore; hop 2 (v2->v3) drives the official v2 decoder and
// v2-to-v3 stage by hand, because the 0.1.3 catalog cannot chain past v1->v2 (it needs the cut before EOF).
// An oracle self-check failure is reported as ok:false with "selfCheck": true.
// Must run on Node >= 22 (node_modules/.bin/node, installed by install.sh).

import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { basename, dirname, isAbsolute, join, relative, resolve } from 'node:path'
import { isDeepStrictEqual } from 'node:util'
import {
  SessionFormatError, SessionFormatEventCollector, SessionFormatUnsupportedMigrationError,
  createSessionFormatCatalog, snapshotSessionFormatHeader,
} from '@deepseek-ai/dsh-session-format'
import {
  RELEASED_V0_EVENT_TYPES, assertReleasedV1Header, isReleasedAssistantChunkRun,
  releasedV0SessionFormatCodec, releasedV1SessionFormatCodec, restoreReleasedV1Artifact, sessionFormatV0ToV1,
} from '@deepseek-ai/dsh-session-format-v0-to-v1'
import {
  RELEASED_V2_EVENT_TYPES, assertReleasedV2Header, releasedV2SessionFormatCodec, restoreReleasedV2Artifact,
  sessionFormatV1ToV2,
} from '@deepseek-ai/dsh-session-format-v1-to-v2'
import {
  assertReleasedV3Header, releasedV3SessionFormatCodec, restoreReleasedV3Artifact, sessionFormatV2ToV3,
} from '@deepseek-ai/dsh-session-format-v2-to-v3'

// Vocabularies handed to the released restorers, standing in for the unpublished dsh-session's
// KNOWN_SESSION_EVENT_TYPES (log-generations.md §5.4).
const V0_TYPES = new Set(RELEASED_V0_EVENT_TYPES)
const V2_TYPES = new Set([...RELEASED_V2_EVENT_TYPES, 'feedback/message-put', 'feedback/message-delete'])
const V3_TYPES = new Set([...V2_TYPES, 'system/message', 'tool/ptc-dispatch', 'tool/ptc-dispatch-start'])
const restoreV1 = artifact => restoreReleasedV1Artifact(artifact, V0_TYPES)
const restoreV2 = artifact => restoreReleasedV2Artifact(artifact, V2_TYPES)
const restoreV3 = artifact => restoreReleasedV3Artifact(artifact, V3_TYPES)
const STRICT = Object.freeze({ recovery: 'strict', validation: 'transformed' })
const REOPEN = Object.freeze({ recovery: 'strict', validation: 'current' }) // applies the released restorer

class SelfCheckError extends Error {}

// ---- v1 writer: no encoder was published, so the oracle writes the shared v0/v1 layout itself ----------

/** §2.2 writer rule: a run of >=3 consecutive seqs becomes [start,end]; a non-increasing list is kept as is. */
function encodeSeqRanges(seqs) {
  if (seqs.some((seq, i) => i > 0 && seq <= seqs[i - 1])) return [...seqs]
  const out = []
  for (let i = 0; i < seqs.length;) {
    let j = i
    while (j + 1 < seqs.length && seqs[j + 1] === seqs[j] + 1) j += 1
    if (j - i >= 2) out.push([seqs[i], seqs[j]])
    else out.push(...seqs.slice(i, j + 1))
    i = j + 1
  }
  return out
}

const v1Encoder = Object.freeze({
  encodeHeader(header, inheritedEventCount) {
    assertReleasedV1Header(header)
    const { version, id, createdAt, cwd, parentSession, isSeeded, origin, delegationDepth, agentPreset } = header
    const optional = (key, value) => value === undefined ? {} : { [key]: value }
    return {
      type: 'session', version, id, createdAt, ...optional('cwd', cwd), ...optional('parentSession', parentSession),
      ...optional('seedLength', isSeeded ? inheritedEventCount : undefined), ...optional('origin', origin),
      delegationDepth, ...optional('agentPreset', agentPreset),
    }
  },
  encodeEvent(event) {
    return event.sourceEventSeqs === undefined ? event : { ...event, sourceEventSeqs: encodeSeqRanges(event.sourceEventSeqs) }
  },
})

/** v1 records of an artifact, re-packing the chunk events that came from the released packed rows in `runs`. */
function encodeV1(artifact, runs) {
  const byFirstSeq = new Map(runs.map(run => [run.firstSeq, run]))
  const records = [v1Encoder.encodeHeader(artifact.header, artifact.inheritedEventCount)]
  for (let i = 0; i < artifact.events.length;) {
    const run = byFirstSeq.get(artifact.events[i].seq)
    if (run === undefined) {
      records.push(v1Encoder.encodeEvent(artifact.events[i]))
      i += 1
      continue
    }
    const { type, time0, index, dt, ...members } = run.stream
    records.push({ type, seq0: run.firstSeq, time0, data: { turn: run.turn, step: run.step, index, dt, ...members } })
    i += run.eventCount
  }
  return records
}

/** v0->v1 exactly as published, with its compact runs observed on the way through (for encodeV1). */
function observingV0ToV1(runs) {
  return {
    ...sessionFormatV0ToV1,
    createStage(input) {
      const stage = sessionFormatV0ToV1.createStage(input)
      return {
        get headerInheritedEventCount() { return stage.headerInheritedEventCount },
        transformEvent: (event, context) => stage.transformEvent(event, context),
        transformRun(run, context) {
          if (isReleasedAssistantChunkRun(run)) runs.push(run)
          stage.transformRun(run, context)
        },
        finish: context => stage.finish(context),
      }
    },
  }
}

// ---- catalogs -------------------------------------------------------------------------------------------

function catalog(currentVersion, { runs } = {}) {
  const all = [
    { codec: releasedV0SessionFormatCodec },
    { codec: releasedV1SessionFormatCodec, migration: runs ? observingV0ToV1(runs) : sessionFormatV0ToV1,
      encoder: v1Encoder, restore: restoreV1, header: assertReleasedV1Header },
    { codec: releasedV2SessionFormatCodec, migration: sessionFormatV1ToV2,
      encoder: releasedV2SessionFormatCodec, restore: restoreV2, header: assertReleasedV2Header },
    { codec: releasedV3SessionFormatCodec, migration: sessionFormatV2ToV3,
      encoder: releasedV3SessionFormatCodec, restore: restoreV3, header: assertReleasedV3Header },
  ].slice(0, currentVersion + 1)
  const current = all.at(-1)
  return createSessionFormatCatalog({
    currentVersion,
    codecs: all.map(entry => entry.codec),
    migrations: all.slice(1).map(entry => entry.migration),
    currentEncoder: current.encoder,
    restoreCurrent: current.restore,
    restoreTransformedCurrent: current.restore,
    restoreCurrentHeader: header => { current.header(header); return header },
  })
}

function restoreRows(target, rows, options) {
  const restore = target.createRestore(rows[0], options)
  for (let i = 1; i < rows.length; i += 1) restore.decodeRow(rows[i])
  return restore.finish()
}

// ---- hop 2: v2 -> v3, labelled as the catalog would label it ----------------------------------------------

function asCatalogRefusal(migration, subject, action) {
  try {
    return action()
  } catch (error) {
    if (error instanceof SessionFormatUnsupportedMigrationError) throw error
    const detail = error instanceof Error ? error.message : String(error)
    throw new SessionFormatUnsupportedMigrationError(
      `${migration.name} refuses this format v${migration.fromVersion} ${subject}: ${detail}`, { cause: error })
  }
}

function migrateV2ToV3(rows, sourceCut) {
  const migration = sessionFormatV2ToV3
  const decoder = releasedV2SessionFormatCodec.createDecoder(rows[0], 'strict')
  const sourceHeader = decoder.header
  const targetHeader = asCatalogRefusal(migration, 'Session header', () => {
    const header = snapshotSessionFormatHeader(migration.migrateHeader(snapshotSessionFormatHeader(sourceHeader)))
    migration.validateTargetHeader(header)
    return header
  })
  const stage = asCatalogRefusal(migration, 'Session', () => migration.createStage({
    sourceHeader, targetHeader, sourceInheritedEventCount: sourceCut, sourceKind: 'decoded',
  }))
  const collector = new SessionFormatEventCollector()
  const context = {
    emitEvent: event => asCatalogRefusal(migration, 'Session', () => stage.transformEvent(event, collector)),
    emitRun: run => asCatalogRefusal(migration, 'Session', () => stage.transformRun(run, collector)),
  }
  for (let i = 1; i < rows.length; i += 1) decoder.decodeRow(rows[i], context)
  if (decoder.finish(context) !== sourceCut) throw new SessionFormatError('format v2 decoder cut differs from its restore')
  const inheritedEventCount = asCatalogRefusal(migration, 'Session', () => stage.finish(collector))
  try {
    return restoreV3({ header: targetHeader, inheritedEventCount, events: collector.values })
  } catch (error) {
    if (error instanceof SessionFormatUnsupportedMigrationError) throw error
    throw new SessionFormatUnsupportedMigrationError(
      `Session migration from v2 to v3 refuses the transformed artifact: ${error.message}`, { cause: error })
  }
}

// ---- files ---------------------------------------------------------------------------------------------

const parseRows = text => text.split('\n').filter(line => line.trim() !== '').map(line => JSON.parse(line))
const rowsText = records => records.map(record => JSON.stringify(record)).join('\n') + '\n'
const encodeWith = (codec, artifact) =>
  [codec.encodeHeader(artifact.header, artifact.inheritedEventCount), ...artifact.events.map(e => codec.encodeEvent(e))]
const sameArtifact = (left, right) => isDeepStrictEqual(
  [left.header, left.inheritedEventCount, left.events], [right.header, right.inheritedEventCount, right.events])

function selfCheck(condition, what) {
  if (!condition) throw new SelfCheckError(what)
}

/** §5.6 (opt-in, not genuine): subagent/descriptor version 2 -> 3 before migrating. */
function bumpDescriptors(rows) {
  for (const row of rows) {
    if (row.type === 'subagent/descriptor' && row.data?.version === 2) row.data.version = 3
  }
  return rows
}

function migrateLog(path, outDir, descriptorBump) {
  const text = readFileSync(path, 'utf8')
  const v0Rows = () => (descriptorBump ? bumpDescriptors : rows => rows)(parseRows(text))
  const stem = basename(path).replace(/\.jsonl$/, '')
  const fileFor = version => join(outDir, `${stem}.v${version}.jsonl`)
  const results = {}
  const attempt = (target, hop, action) => {
    rmSync(fileFor(target), { force: true }) // never leave a stale generation behind a refusal
    try {
      const file = fileFor(target)
      writeFileSync(file, action(file))
      results[target] = { ok: true, file }
    } catch (error) {
      const selfCheckFailed = error instanceof SelfCheckError
      results[target] = {
        ok: false, error: selfCheckFailed ? `oracle self-check failed: ${error.message}` : error.message,
        errorName: error?.name ?? typeof error, hop, ...(selfCheckFailed ? { selfCheck: true } : {}),
      }
    }
  }

  attempt(1, 1, () => {
    const runs = []
    const v1 = restoreRows(catalog(1, { runs }), v0Rows(), STRICT)
    const written = rowsText(encodeV1(v1, runs))
    const reopened = restoreRows(catalog(1), parseRows(written), REOPEN)
    selfCheck(sameArtifact(reopened, v1), 'the hand-written v1 does not re-open to the official v1 restore')
    return written
  })

  let v2
  attempt(2, 1, () => {
    v2 = restoreRows(catalog(2), v0Rows(), STRICT)
    const written = rowsText(encodeWith(releasedV2SessionFormatCodec, v2))
    selfCheck(sameArtifact(restoreRows(catalog(2), parseRows(written), REOPEN), v2), 'v2 does not re-open to itself')
    return written
  })

  if (!results[2].ok) {
    results[3] = { ...results[2] } // no v2, no v3: the v2 refusal stands for both
  } else {
    attempt(3, 2, () => {
      const v3 = migrateV2ToV3(parseRows(readFileSync(fileFor(2), 'utf8')), v2.inheritedEventCount)
      const written = rowsText(encodeWith(releasedV3SessionFormatCodec, v3))
      selfCheck(sameArtifact(restoreRows(catalog(3), parseRows(written), REOPEN), v3), 'v3 does not re-open to itself')
      const v2Again = restoreRows(catalog(2), parseRows(readFileSync(fileFor(2), 'utf8')), REOPEN)
      const v3Again = migrateV2ToV3(parseRows(readFileSync(fileFor(2), 'utf8')), v2Again.inheritedEventCount)
      selfCheck(sameArtifact(v3Again, v3), 're-migrating the written v2 gives a different v3')
      return written
    })
  }
  return results
}

// ---- command line --------------------------------------------------------------------------------------

async function main(argv) {
  if (Number(process.versions.node.split('.')[0]) < 22) {
    process.stderr.write(`migrate.mjs needs Node >= 22 (running ${process.version}); use node_modules/.bin/node\n`)
    return 2
  }
  const options = { descriptorBump: false, outDir: undefined, root: undefined }
  const logs = []
  for (let i = 0; i < argv.length; i += 1) {
    const arg = argv[i]
    if (arg === '--descriptor-bump') options.descriptorBump = true
    else if (arg === '--out-dir' || arg === '--root') options[arg === '--root' ? 'root' : 'outDir'] = resolve(argv[++i])
    else if (arg.startsWith('--')) {
      process.stderr.write(`migrate.mjs: unknown option ${arg}\n`)
      return 2
    } else logs.push(arg)
  }
  if (logs.length === 0) {
    const chunks = []
    for await (const chunk of process.stdin) chunks.push(chunk)
    logs.push(...Buffer.concat(chunks).toString('utf8').split('\n').map(line => line.trim()).filter(Boolean))
  }
  const started = performance.now()
  for (const path of logs) {
    const logDir = dirname(resolve(path))
    let outDir = logDir
    if (options.outDir !== undefined) {
      const inner = relative(options.root ?? logDir, logDir)
      if (inner.startsWith('..') || isAbsolute(inner)) {
        process.stderr.write(`migrate.mjs: ${path} is not under --root ${options.root}\n`)
        return 2
      }
      outDir = join(options.outDir, inner)
    }
    mkdirSync(outDir, { recursive: true })
    const results = migrateLog(path, outDir, options.descriptorBump)
    for (const target of [1, 2, 3]) process.stdout.write(`${JSON.stringify({ path, target, ...results[target] })}\n`)
  }
  process.stderr.write(`migrate.mjs: ${logs.length} log(s) in ${((performance.now() - started) / 1000).toFixed(2)} s\n`)
  return 0
}

process.exitCode = await main(process.argv.slice(2))
