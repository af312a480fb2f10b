// Stand-in for the one export of @deepseek-ai/dsh-llm >=0.1.3-alpha.2 that the published
// @deepseek-ai/dsh-session-format-v1-to-v2 imports. That dsh-llm version was never published
// (npm stops at 0.1.1-rc.2, which lacks the class), so this is written from the behaviour
// documented in docs/official-migration.md (log-generations.md §5.2), not copied from upstream.
//
// The accumulator compacts the timed chunks of one model attempt into stream records:
//   text/reasoning deltas  -> {type:'text-chunks'|'reasoning-chunks', time0, index, dt, texts}
//   named tool-call deltas -> {type:'tool-call-chunks', time0, index, dt, id, name?, args}
//   everything else        -> {type:'chunk', time, chunk}   (raw, one record per chunk)
// Only the last record is ever extended, so the only state beyond the records is the time of
// the last record's last member.

import { deepFreeze, snapshotJsonValue } from '@deepseek-ai/dsh-util-values'

const PACKED_TEXT = new Map([['text-delta', 'text-chunks'], ['reasoning-delta', 'reasoning-chunks']])
const RAW_TYPES = new Set(['block-start', 'block-end', 'usage', 'finish'])

function requireSafeTime(time) {
  if (!Number.isSafeInteger(time)) throw new TypeError(`stream time must be a safe integer, got ${String(time)}`)
  return time
}

function requireIndex(chunk) {
  const index = chunk.index
  if (!Number.isSafeInteger(index) || index < 0 || Object.is(index, -0)) {
    throw new TypeError(`${chunk.type} index must be a non-negative safe integer`)
  }
}

function requireString(value, label) {
  if (typeof value !== 'string') throw new TypeError(`${label} must be a string`)
}

/** Detached lossless-JSON copy of a caller's chunk; anything JSON would not round-trip is refused. */
function detachChunk(chunk) {
  const copy = snapshotJsonValue(chunk)
  if (copy === undefined || copy === null || typeof copy !== 'object' || Array.isArray(copy)) {
    throw new TypeError('stream chunk must be a lossless JSON object')
  }
  return copy
}

export class AssistantStreamAccumulator {
  #records = []
  #lastTime = undefined // member time of the last packed record's last member

  /** Add one {time, chunk}; returns a frozen detached copy of it. */
  push(value) {
    const time = requireSafeTime(value?.time)
    const chunk = detachChunk(value?.chunk)
    const timed = deepFreeze({ time, chunk })
    const last = this.#records.at(-1)
    const gap = last !== undefined && last.type !== 'chunk' && Number.isSafeInteger(time - this.#lastTime)
      ? time - this.#lastTime
      : undefined

    const packedType = PACKED_TEXT.get(chunk.type)
    if (packedType !== undefined) {
      requireIndex(chunk)
      requireString(chunk.text, `${chunk.type} text`)
      if (gap !== undefined && last.type === packedType && last.index === chunk.index) {
        this.#extend(last, 'texts', gap, chunk.text, time)
      } else {
        this.#open({ type: packedType, time0: time, index: chunk.index, dt: [], texts: [chunk.text] }, time)
      }
    } else if (chunk.type === 'tool-call-delta') {
      requireIndex(chunk)
      requireString(chunk.id, 'tool-call-delta id')
      const named = Object.hasOwn(chunk, 'name')
      if (named) requireString(chunk.name, 'tool-call-delta name')
      requireString(chunk.argumentsDelta, 'tool-call-delta argumentsDelta')
      if (chunk.id === '' || chunk.name === '') {
        // A delta that cannot be keyed (no id) or would lose an explicit empty name stays raw.
        this.#records.push({ type: 'chunk', time, chunk })
      } else if (gap !== undefined && last.type === 'tool-call-chunks' && last.index === chunk.index
        && last.id === chunk.id && Object.hasOwn(last, 'name') === named && last.name === chunk.name) {
        this.#extend(last, 'args', gap, chunk.argumentsDelta, time)
      } else {
        const record = { type: 'tool-call-chunks', time0: time, index: chunk.index, dt: [], id: chunk.id }
        if (named) record.name = chunk.name
        record.args = [chunk.argumentsDelta]
        this.#open(record, time)
      }
    } else if (RAW_TYPES.has(chunk.type)) {
      this.#records.push({ type: 'chunk', time, chunk })
    } else {
      throw new TypeError(`AssistantStreamAccumulator cannot record chunk type ${JSON.stringify(chunk.type)}`)
    }
    return timed
  }

  /** The records so far, in order, as detached deep-frozen copies. */
  snapshot() {
    return deepFreeze(this.#records.map(record => snapshotJsonValue(record)))
  }

  #open(record, time) {
    this.#records.push(record)
    this.#lastTime = time
  }

  #extend(record, members, gap, member, time) {
    record.dt.push(gap)
    record[members].push(member)
    this.#lastTime = time
  }
}
