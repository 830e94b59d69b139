/** Messages between `npm run bench:fleet-cpu` and its processes. */
export type FleetParentToChild = { type: 'go'; warmUpMs: number; durationMs: number; gapMs: number; loops: number }
export type FleetChildToParent =
  | { type: 'ready' }
  | {
      type: 'done'
      calls: number
      /** Loader calls: the database queries this process made. */
      loads: number
      /** process.cpuUsage over the run (µs): every thread, user + system. */
      cpuUs: number
      systemUs: number
      /** The main (JavaScript) thread's CPU over the run (µs), from /proc; the rest is V8's helper threads. */
      mainThreadUs: number
      /** Redis commands the client sent (a script call counts once), by name. */
      commands: Record<string, number>
    }
