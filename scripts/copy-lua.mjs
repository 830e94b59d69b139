// tsc does not copy non-TypeScript files; the Lua scripts are read at run time next to scripts.js.
import { cpSync } from 'node:fs'

cpSync(new URL('../src/redis/scripts/', import.meta.url), new URL('../dist/redis/scripts/', import.meta.url), {
  recursive: true,
  filter: (source) => !source.includes('.') || source.endsWith('.lua') || source.endsWith('/'),
})
