export { LeaderObserver } from './observer.js'
export type { ElectOptions, Leadership } from './options.js'
export type { ObserveOptions } from './observe-options.js'
export type { ElectionStore, Leader, LeaderFeed, LeaderReading } from './store.js'
