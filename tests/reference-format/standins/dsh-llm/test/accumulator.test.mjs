// One test per row of the AssistantStreamAccumulator behaviour table (docs/official-migration.md).
//   node --test standins/dsh-llm/test      (from tests/reference-format)

import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { AssistantStreamAccumulator } from '@deepseek-ai/dsh-llm'

const text = (text, index = 0) => ({ type: 'text-delta', index, text })
const reasoning = (text, index = 0) => ({ type: 'reasoning-delta', index, text })
const tool = (argumentsDelta, extra = {}) => ({ type: 'tool-call-delta', index: 1, id: 'call_1', argumentsDelta, ...extra })

function records(...timed) {
  const accumulator = new AssistantStreamAccumulator()
  for (const [time, chunk] of timed) accumulator.push({ time, chunk })
  return accumulator.snapshot()
}

describe('push({time, chunk})', () => {
  test('time must be a safe integer', () => {
    const accumulator = new AssistantStreamAccumulator()
    for (const time of [1.5, Number.NaN, 2 ** 53, '3', undefined]) {
      assert.throws(() => accumulator.push({ time, chunk: text('a') }), TypeError)
    }
    assert.deepEqual(accumulator.snapshot(), [])
  })

  test('the chunk is snapshotted as lossless JSON', () => {
    const accumulator = new AssistantStreamAccumulator()
    assert.throws(() => accumulator.push({ time: 0, chunk: { type: 'usage', usage: { inputTokens: Number.NaN } } }),
      TypeError)
    assert.throws(() => accumulator.push({ time: 0, chunk: { type: 'usage', usage: { f: () => 1 } } }), TypeError)
    const chunk = { type: 'usage', usage: { inputTokens: 3 } }
    accumulator.push({ time: 0, chunk })
    chunk.usage.inputTokens = 99 // a later caller mutation must not reach the record
    assert.deepEqual(accumulator.snapshot(), [{ type: 'chunk', time: 0, chunk: { type: 'usage', usage: { inputTokens: 3 } } }])
  })

  test('returns a frozen detached {time, chunk} copy', () => {
    const chunk = text('hi')
    const timed = new AssistantStreamAccumulator().push({ time: 7, chunk, extra: true })
    assert.deepEqual(timed, { time: 7, chunk: text('hi') })
    assert.notEqual(timed.chunk, chunk)
    assert.ok(Object.isFrozen(timed) && Object.isFrozen(timed.chunk))
  })

  test('only ever extends the last record', () => {
    assert.deepEqual(records([0, text('a')], [1, reasoning('r')], [2, text('b')]), [
      { type: 'text-chunks', time0: 0, index: 0, dt: [], texts: ['a'] },
      { type: 'reasoning-chunks', time0: 1, index: 0, dt: [], texts: ['r'] },
      { type: 'text-chunks', time0: 2, index: 0, dt: [], texts: ['b'] },
    ])
  })
})

describe('text-delta, reasoning-delta', () => {
  test('same type and index with a safe gap extends the last record (gap -> dt, text -> texts)', () => {
    assert.deepEqual(records([10, text('a')], [10, text('b')], [13, text('c')]),
      [{ type: 'text-chunks', time0: 10, index: 0, dt: [0, 3], texts: ['a', 'b', 'c'] }])
    assert.deepEqual(records([5, reasoning('x')], [4, reasoning('y')]),
      [{ type: 'reasoning-chunks', time0: 5, index: 0, dt: [-1], texts: ['x', 'y'] }])
  })

  test('a different index or an unsafe gap opens a new record; a lone delta is a one-member record', () => {
    assert.deepEqual(records([0, text('a', 0)], [1, text('b', 2)]), [
      { type: 'text-chunks', time0: 0, index: 0, dt: [], texts: ['a'] },
      { type: 'text-chunks', time0: 1, index: 2, dt: [], texts: ['b'] },
    ])
    const far = Number.MAX_SAFE_INTEGER
    assert.equal(records([-far, text('a')], [far, text('b')]).length, 2)
  })

  test('index must be a non-negative safe integer and text a string', () => {
    const accumulator = new AssistantStreamAccumulator()
    for (const chunk of [text('a', -1), text('a', 0.5), { type: 'text-delta', index: 0 }, reasoning(3)]) {
      assert.throws(() => accumulator.push({ time: 0, chunk }), TypeError)
    }
  })
})

describe('tool-call-delta', () => {
  test("id '' or name '' stays a raw chunk record", () => {
    assert.deepEqual(records([0, tool('{', { id: '' })], [1, tool('}', { name: '' })]), [
      { type: 'chunk', time: 0, chunk: tool('{', { id: '' }) },
      { type: 'chunk', time: 1, chunk: tool('}', { name: '' }) },
    ])
  })

  test('same index, id and name (presence and value) with a safe gap extends the last record', () => {
    assert.deepEqual(records([0, tool('{', { name: 'bash' })], [2, tool('}', { name: 'bash' })]),
      [{ type: 'tool-call-chunks', time0: 0, index: 1, dt: [2], id: 'call_1', name: 'bash', args: ['{', '}'] }])
    assert.deepEqual(records([0, tool('{')], [0, tool('}')]),
      [{ type: 'tool-call-chunks', time0: 0, index: 1, dt: [0], id: 'call_1', args: ['{', '}'] }])
  })

  test('otherwise opens a new record, with name only when the chunk has its own', () => {
    const opened = records(
      [0, tool('a', { name: 'bash' })],
      [1, tool('b')], // name absent: presence differs
      [2, tool('c', { name: 'read' })], // presence differs again
      [3, tool('d', { name: 'bash' })], // value differs
      [4, tool('e', { name: 'bash', id: 'call_2' })], // id differs
      [5, tool('f', { name: 'bash', id: 'call_2', index: 2 })], // index differs
    )
    assert.equal(opened.length, 6)
    assert.equal(Object.hasOwn(opened[1], 'name'), false)
    assert.deepEqual(Object.keys(opened[0]), ['type', 'time0', 'index', 'dt', 'id', 'name', 'args'])
    assert.deepEqual(opened.map(record => record.args), [['a'], ['b'], ['c'], ['d'], ['e'], ['f']])
  })

  test('id, name and argumentsDelta must be strings', () => {
    const accumulator = new AssistantStreamAccumulator()
    for (const extra of [{ id: 1 }, { name: null }, { argumentsDelta: {} }]) {
      assert.throws(() => accumulator.push({ time: 0, chunk: tool('x', extra) }), TypeError)
    }
  })
})

describe('block-start, block-end, usage, finish', () => {
  test('are raw chunk records; any other chunk type throws', () => {
    const raw = [
      { type: 'block-start', index: 0, block: { type: 'text' } },
      { type: 'block-end', index: 0, block: { type: 'text', text: 'a' } },
      { type: 'usage', usage: { inputTokens: 1 } },
      { type: 'finish', reason: { kind: 'stop' } },
    ]
    assert.deepEqual(records(...raw.map((chunk, time) => [time, chunk])),
      raw.map((chunk, time) => ({ type: 'chunk', time, chunk })))
    assert.throws(() => new AssistantStreamAccumulator().push({ time: 0, chunk: { type: 'image-delta' } }), TypeError)
  })
})

describe('snapshot()', () => {
  test('records in order, detached and deep-frozen, without the internal last time', () => {
    const accumulator = new AssistantStreamAccumulator()
    accumulator.push({ time: 0, chunk: text('a') })
    const first = accumulator.snapshot()
    accumulator.push({ time: 1, chunk: text('b') })
    accumulator.push({ time: 2, chunk: { type: 'finish', reason: { kind: 'stop' } } })
    assert.deepEqual(first, [{ type: 'text-chunks', time0: 0, index: 0, dt: [], texts: ['a'] }])
    const second = accumulator.snapshot()
    assert.deepEqual(second.map(record => Object.keys(record)),
      [['type', 'time0', 'index', 'dt', 'texts'], ['type', 'time', 'chunk']])
    assert.ok(Object.isFrozen(second) && Object.isFrozen(second[0].texts) && Object.isFrozen(second[1].chunk.reason))
    assert.deepEqual(accumulator.snapshot(), second)
    assert.notEqual(accumulator.snapshot()[0], second[0])
  })
})
