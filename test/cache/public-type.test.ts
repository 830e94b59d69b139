/**
 * The `Cache` users see in the emitted .d.ts: its public API and nothing else. Its parts
 * (core, leader, refresher, resolver, …) are #private fields, which a declaration shows as
 * one `#private;` line, so no internal member or internal type is published through it.
 */
import { fileURLToPath } from 'node:url'
import ts from 'typescript'
import { describe, expect, it } from 'vitest'

const ROOT = fileURLToPath(new URL('../../', import.meta.url))

/** The declaration tsc emits for src/cache/cache.ts, with the build's options. */
function emittedCacheDeclaration(): string {
  const config = ts.getParsedCommandLineOfConfigFile(
    `${ROOT}tsconfig.build.json`,
    {},
    {
      ...ts.sys,
      onUnRecoverableConfigFileDiagnostic: (diagnostic) => {
        throw new Error(ts.flattenDiagnosticMessageText(diagnostic.messageText, '\n'))
      },
    },
  )!
  const options = { ...config.options, noEmit: false, declaration: true, emitDeclarationOnly: true }
  const program = ts.createProgram([`${ROOT}src/index.ts`], options)
  let declaration: string | undefined
  const cacheFile = program.getSourceFile(`${ROOT}src/cache/cache.ts`)!
  program.emit(cacheFile, (name, text) => {
    if (name.endsWith('/cache/cache.d.ts')) declaration = text
  })
  if (declaration === undefined) throw new Error('no declaration emitted for src/cache/cache.ts')
  return declaration
}

describe('the emitted Cache type', () => {
  it('declares the public API only: no private, protected or internal member', () => {
    const source = ts.createSourceFile('cache.d.ts', emittedCacheDeclaration(), ts.ScriptTarget.ES2022, true)
    const cache = source.statements.find(
      (statement): statement is ts.ClassDeclaration =>
        ts.isClassDeclaration(statement) && statement.name?.text === 'Cache',
    )!
    expect(cache).toBeDefined()
    // A base class would publish its private and protected members in its own .d.ts.
    expect(cache.heritageClauses?.map((clause) => clause.getText(source))).toBeUndefined()
    const members = cache.members.map((member) => {
      const modifiers = ts.canHaveModifiers(member) ? (ts.getModifiers(member) ?? []) : []
      const hidden = modifiers.filter(
        (modifier) =>
          modifier.kind === ts.SyntaxKind.PrivateKeyword || modifier.kind === ts.SyntaxKind.ProtectedKeyword,
      )
      expect(hidden, `${member.getText(source)} is private or protected`).toEqual([])
      return member.name ? member.name.getText(source) : ts.SyntaxKind[member.kind]
    })
    expect([...new Set(members)].sort()).toEqual(
      [
        '#private',
        'Constructor',
        '[LOAD_SCOPE]', // instrument()'s slot, keyed by a symbol no entry point exports
        'batcher',
        'clear',
        'close',
        'delete',
        'deleteByTag',
        'deleteByTags',
        'expire',
        'expireByTag',
        'getOrLoad',
        'getOrLoadMany',
        'get',
        'getOrLoadResult',
        'has',
        'namespace',
        'on',
        'ready',
        'set',
        'stats',
        'wrap',
      ].sort(),
    )
  }, 60_000)
})
