import type { CacheEmitter } from '../../events.js'

/**
 * Consecutive-failure circuit breaker. Closed: every command goes to Redis.
 * Open: none does, so a dead Redis costs no timeouts. After `openForMs` one probe
 * is let through (half-open); its success closes the breaker, its failure reopens it.
 */
export class CircuitBreaker {
  private state: 'closed' | 'open' | 'half-open' = 'closed'
  private failures = 0
  private openedAt = 0

  constructor(
    private readonly threshold: number,
    private readonly openForMs: number,
    private readonly events: CacheEmitter,
  ) {}

  /** May a command be sent now? In half-open state only the single probe may. */
  allow(): boolean {
    if (this.state === 'closed') return true
    if (this.state === 'open' && performance.now() - this.openedAt >= this.openForMs) {
      this.state = 'half-open'
      return true
    }
    return false
  }

  /** Open (not half-open): commands waiting to be sent should give up. */
  isOpen(): boolean {
    return this.state === 'open'
  }

  success(): void {
    this.failures = 0
    if (this.state !== 'closed') {
      this.state = 'closed'
      this.events.emit('circuit-close', {})
    }
  }

  failure(): void {
    this.failures++
    if (this.state === 'half-open' || (this.state === 'closed' && this.failures >= this.threshold)) {
      if (this.state === 'closed') this.events.emit('circuit-open', { failures: this.failures })
      this.state = 'open'
      this.openedAt = performance.now()
    }
  }
}
