/**
 * How a loader's failure crosses processes. A loader may throw anything: a string, `null`,
 * an object whose `name` or `message` getter throws, a name containing `|`. Reading it must
 * never throw (the lock would stay held and waiters would wait out the lease), and no
 * character in it may break the framing of the message that tells the waiters.
 */

/** What other processes learn of a failed load. */
export interface LoaderFailure {
  name: string
  message: string
}

/** Longest name and message sent across processes (in UTF-16 units); longer ones are cut. */
export const MAX_ERROR_NAME_LENGTH = 200
export const MAX_ERROR_MESSAGE_LENGTH = 4_096

function attempt<T>(read: () => T): T | undefined {
  try {
    return read()
  } catch {
    return undefined
  }
}

function cut(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`
}

/**
 * Name and message of anything thrown, without ever throwing. An Error-like object gives
 * its own `name` (else its constructor's) and `message`; anything else is a `NonError`
 * described by `String(value)`.
 */
export function describeFailure(thrown: unknown): LoaderFailure {
  if (typeof thrown === 'object' && thrown !== null) {
    const name = attempt(() => (thrown as Error).name)
    const message = attempt(() => (thrown as Error).message)
    const constructorName = attempt(() => (thrown as object).constructor?.name)
    return {
      name: cut(
        typeof name === 'string' && name
          ? name
          : typeof constructorName === 'string' && constructorName
            ? constructorName
            : 'Error',
        MAX_ERROR_NAME_LENGTH,
      ),
      message: cut(
        typeof message === 'string' ? message : (attempt(() => String(thrown)) ?? '(its message could not be read)'),
        MAX_ERROR_MESSAGE_LENGTH,
      ),
    }
  }
  return { name: 'NonError', message: cut(attempt(() => String(thrown)) ?? typeof thrown, MAX_ERROR_MESSAGE_LENGTH) }
}

/**
 * `e|["<name>","<message>"]`: JSON-encoded, so `|`, newlines, quotes and even lone
 * surrogates (escaped as `\uD800`, so valid UTF-8 on the wire) cannot break the frame.
 * release.lua publishes it and stores it as the negative-cache message `m` unchanged.
 */
export function encodeFailure(thrown: unknown): string {
  const { name, message } = describeFailure(thrown)
  return `e|${JSON.stringify([name, message])}`
}

/** Reads `e|…` back; also the older `e|<name>|<message>` form, from processes not yet upgraded. */
export function decodeFailure(framed: string): LoaderFailure {
  const body = framed.slice(2)
  if (body.startsWith('[')) {
    const parsed = attempt(() => JSON.parse(body) as unknown)
    if (Array.isArray(parsed) && typeof parsed[0] === 'string' && typeof parsed[1] === 'string')
      return { name: parsed[0], message: parsed[1] }
  }
  const bar = body.indexOf('|')
  return bar < 0
    ? { name: 'Error', message: body }
    : { name: body.slice(0, bar) || 'Error', message: body.slice(bar + 1) }
}
