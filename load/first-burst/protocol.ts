/** Messages between the first-burst benchmark and its freshly started processes. */
export type BurstParentToChild = { type: 'go'; key: string; calls: number; loaderMs: number } | { type: 'exit' }
export type BurstChildToParent =
  { type: 'ready' } | { type: 'burst'; samples: { ms: number; ranLoader: boolean }[]; goAt: number; led: boolean }
