/** Both Express majors the middleware supports, for `describe.each`: every RFC and security test runs on each. */
import express, { type Express } from 'express'
import express4 from 'express4'

export interface ExpressVersion {
  name: string
  express: () => Express
}

export const EXPRESS_VERSIONS: ExpressVersion[] = [
  { name: 'Express 5', express: () => express() },
  { name: 'Express 4', express: () => express4() as Express },
]
