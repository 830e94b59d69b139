import type { LoaderContext } from '../context.js'

/**
 * Runs one loader call. `instrument()` installs one on a cache so the loader runs inside
 * its load span: spans the loader opens (a database query) become that span's children.
 * Internal: this module imports nothing from OpenTelemetry, so the cache can check for a
 * scope without loading it.
 */
export type LoadScope = (context: LoaderContext<unknown>, run: () => unknown) => unknown

/** The cache's slot for its load scope; not exported from the package entry points. */
export const LOAD_SCOPE: unique symbol = Symbol('stampede-guard.loadScope')
