// Loaded with --import before any other module of a worker: shifts this process's wall
// clock by CLOCK_OFFSET_MS (ms, may be negative). Date.now(), new Date() and Date() all
// read the shifted clock; performance.now() (monotonic) is left alone. A design that puts
// a client's wall clock into a lease would notice; the semaphore must not.
/* global process */
const offset = Number(process.env.CLOCK_OFFSET_MS ?? 0)
if (offset) {
  const RealDate = globalThis.Date
  class ShiftedDate extends RealDate {
    constructor(...args) {
      if (args.length === 0) super(RealDate.now() + offset)
      else super(...args)
    }
    static now() {
      return RealDate.now() + offset
    }
  }
  globalThis.Date = new Proxy(ShiftedDate, { apply: () => new ShiftedDate().toString() })
}
