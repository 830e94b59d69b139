/** Runs one examples/*.ts file as its README line does (tsx), bounded in time. */
import { spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { tsxExecArgv } from '../../load/shared/fork-ts.js'

export interface ExampleRun {
  code: number | null
  signal: NodeJS.Signals | null
  stdout: string
  stderr: string
}

export function runExample(name: string, env: NodeJS.ProcessEnv, timeoutMs = 45_000): Promise<ExampleRun> {
  const file = fileURLToPath(new URL(`../../examples/${name}`, import.meta.url))
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...tsxExecArgv(), file], {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()))
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()))
    // "Must exit on its own": past the bound it is killed and the test sees the signal.
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs)
    child.once('error', reject)
    child.once('exit', (code, signal) => {
      clearTimeout(timer)
      resolve({ code, signal, stdout, stderr })
    })
  })
}
