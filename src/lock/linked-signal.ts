/**
 * A signal that aborts (with the first reason) when any of `sources` does, for one
 * acquisition; `dispose()` detaches it from the sources when the acquisition is over.
 *
 * Not `AbortSignal.any`: on Node 20 every signal it makes stays in each source's
 * dependants set for as long as the source lives, so one `any()` per acquisition over a
 * long-lived signal (a `Locks`' close() signal, a backend's closing or session-expiry
 * signal) retained memory without bound. Listeners added here are removed again.
 */
export interface LinkedSignal {
  readonly signal: AbortSignal
  dispose(): void
}

export function linkedSignal(sources: readonly AbortSignal[]): LinkedSignal {
  const controller = new AbortController()
  const already = sources.find((source) => source.aborted)
  if (already) {
    controller.abort(already.reason)
    return { signal: controller.signal, dispose() {} }
  }
  const detach = () => {
    for (const source of sources) source.removeEventListener('abort', onAbort)
  }
  function onAbort(this: AbortSignal) {
    detach()
    controller.abort(this.reason)
  }
  for (const source of sources) source.addEventListener('abort', onAbort, { once: true })
  return { signal: controller.signal, dispose: detach }
}
