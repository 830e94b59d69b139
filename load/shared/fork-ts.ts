/**
 * Forks a TypeScript file as a Node child process with tsx's loader, whatever is running
 * the parent (tsx, vitest, plain node): the load-test app and the benchmarks' children
 * are .ts files run directly, no build step.
 */
import { fork, type ChildProcess } from 'node:child_process'
import { createRequire } from 'node:module'
import { pathToFileURL } from 'node:url'

export function tsxExecArgv(): string[] {
  const loader = createRequire(import.meta.url).resolve('tsx')
  return ['--import', pathToFileURL(loader).href]
}

export function forkTs(file: string, env: NodeJS.ProcessEnv, nodeFlags: string[] = []): ChildProcess {
  return fork(file, [], {
    execArgv: [...nodeFlags, ...tsxExecArgv()],
    env: { ...process.env, ...env },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  })
}
