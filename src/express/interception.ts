import type { ServerResponse } from 'node:http'

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- "any function", whatever it returns
export type AnyFunction = (...args: any[]) => any

/** The response API we shadow. */
export const METHODS = [
  'writeHead',
  'write',
  'end',
  'flushHeaders',
  'addTrailers',
  'setHeader',
  'appendHeader',
  'setHeaders',
  'getHeader',
  'getHeaders',
  'getHeaderNames',
  'hasHeader',
  'removeHeader',
] as const
export type MethodName = (typeof METHODS)[number]
const ACCESSORS = ['statusCode', 'statusMessage', 'headersSent'] as const
export type AccessorName = (typeof ACCESSORS)[number]

/**
 * The own properties a capture puts over the live response's API (see capture.ts), and
 * what puts them back: the methods in place before (the prototype's, or upstream
 * middleware's wrappers), the live status kept meanwhile, and the property descriptors
 * to restore, including wrappers that middleware after us added to the shadows.
 */
export class Interception {
  /** The methods in place before us (the prototype's, or upstream middleware's wrappers). */
  readonly upstream = {} as Record<MethodName, AnyFunction>
  /** The live response's own status, kept while ours are shadowed. */
  readonly live: { statusCode: number; statusMessage: string }
  readonly liveHeadersSent: () => boolean
  /** Own property descriptors before we installed, to put back. */
  private readonly before = new Map<string, PropertyDescriptor | undefined>()
  installed = false

  constructor(private readonly res: ServerResponse) {
    this.live = { statusCode: res.statusCode, statusMessage: res.statusMessage }
    this.liveHeadersSent = inheritedGetter(res, 'headersSent')
  }

  /** Shadows the response API with `shadows` and the status accessors with `accessors`. */
  install(shadows: Record<MethodName, AnyFunction>, accessors: Record<AccessorName, PropertyDescriptor>): void {
    const res = this.res as unknown as Record<string, unknown>
    for (const key of this.managedKeys()) this.before.set(key, Object.getOwnPropertyDescriptor(res, key))
    for (const name of METHODS) this.upstream[name] = res[name] as AnyFunction
    for (const name of METHODS)
      Object.defineProperty(res, name, { value: shadows[name], writable: true, configurable: true, enumerable: false })
    for (const name of ACCESSORS) Object.defineProperty(res, name, accessors[name])
    this.installed = true
  }

  /** Runs `fn` against the live response with the shadows lifted, then puts them back. */
  lifted<T>(fn: () => T): T {
    const current = this.ownDescriptors()
    this.restore(this.before)
    try {
      return fn()
    } finally {
      this.live.statusCode = this.res.statusCode
      this.live.statusMessage = this.res.statusMessage
      this.restore(current)
    }
  }

  /** Puts the live response's API back for good, dropping wrappers added after us. */
  remove(): void {
    this.restore(this.before)
    this.installed = false
  }

  /** Our names plus every own function property (wrappers that middleware after us added). */
  private managedKeys(): string[] {
    const res = this.res as unknown as Record<string, unknown>
    const own = Object.keys(res).filter((key) => typeof res[key] === 'function')
    return [...new Set<string>([...METHODS, ...ACCESSORS, ...own, ...this.before.keys()])]
  }

  private ownDescriptors(): Map<string, PropertyDescriptor | undefined> {
    return new Map(this.managedKeys().map((key) => [key, Object.getOwnPropertyDescriptor(this.res, key)]))
  }

  /** Sets every managed key back to `descriptors`; `statusCode`/`statusMessage` carry the live values. */
  private restore(descriptors: Map<string, PropertyDescriptor | undefined>): void {
    const res = this.res as unknown as Record<string, unknown>
    for (const key of this.managedKeys()) {
      const descriptor = descriptors.get(key)
      if (descriptors === this.before && (key === 'statusCode' || key === 'statusMessage')) {
        Object.defineProperty(res, key, { value: this.live[key], writable: true, enumerable: true, configurable: true })
      } else if (descriptor) {
        Object.defineProperty(res, key, descriptor)
      } else {
        delete res[key]
      }
    }
  }
}

/** The getter `name` resolves to through the prototype chain, bound to `target`. */
function inheritedGetter(target: object, name: string): () => boolean {
  for (let proto: object | null = target; proto; proto = Object.getPrototypeOf(proto)) {
    const descriptor = Object.getOwnPropertyDescriptor(proto, name)
    if (descriptor?.get) return () => Boolean(descriptor.get!.call(target))
    if (descriptor) return () => Boolean((target as Record<string, unknown>)[name])
  }
  return () => false
}
