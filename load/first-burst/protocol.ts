/** Messages between the first-burst benchmark and its freshly started processes. */
export type BurstParentToChild = { type: 'go'; key: string; calls: number; loaderMs: number } | { type: 'exit' }
export type BurstChildToParent =
  | { type: 'ready' }
  | {
      type: 'burst'
      samples: { ms: number; ranLoader: boolean }[]
      goAt: number
      led: boolean
      /** ms from go to when the process's Redis connection was ready: ≤ 0 when it was ready already. */
      connectedMs: number
      /** ms from go to the loader's start, in the process that loaded; else undefined. */
      loaderMs: number | undefined
    }
