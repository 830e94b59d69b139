/** Waiting in tests: by events where possible (gate, until), by time only where a window is the point. */

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

/** A promise the test opens when it wants: holds a loader or handler mid-flight. */
export function gate(): { promise: Promise<void>; open(): void } {
  let open!: () => void
  const promise = new Promise<void>((resolve) => (open = resolve))
  return { promise, open }
}

/** Polls `condition` until true; fails after `timeoutMs` (generous: this is a 2-core machine). */
export async function until(
  condition: () => boolean | Promise<boolean>,
  what: string,
  timeoutMs = 10_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await sleep(5)
  }
}

/** Resolves with `signal`'s reason once it aborts (at once if it has); fails after `timeoutMs`. */
export function abortReason(signal: AbortSignal, what: string, timeoutMs = 10_000): Promise<unknown> {
  if (signal.aborted) return Promise.resolve(signal.reason)
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`timed out waiting for ${what}`)), timeoutMs)
    signal.addEventListener(
      'abort',
      () => {
        clearTimeout(timer)
        resolve(signal.reason)
      },
      { once: true },
    )
  })
}
