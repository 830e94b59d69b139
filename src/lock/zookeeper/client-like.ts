/**
 * The node-zookeeper-client types as this package's public API names them: by shape, so
 * its `.d.ts` never import `node-zookeeper-client` (an optional peer, whose types live in
 * a separate `@types` package) and compile for users who install neither. The backend
 * itself works on the package's own types (see calls.ts); test/unit/peer-types.test.ts
 * checks that they fit these shapes.
 */

/** A node-zookeeper-client `Client` (`zookeeper.createClient(…)`, connected by you). Checked at run time too. */
export interface ZooKeeperClientLike {
  // Parameters are `never[]`: the package's own signatures fit.
  create(...args: never[]): unknown
  getChildren(...args: never[]): unknown
  transaction(...args: never[]): unknown
  getSessionTimeout(): number
}

/** A node-zookeeper-client `Transaction` (a multi-op), as a ZooKeeper lock's `resource.transaction()` returns it. */
export interface ZooKeeperTransactionLike {
  create(
    path: string,
    data?: Buffer | unknown[] | number,
    acls?: Buffer | unknown[] | number,
    mode?: Buffer | unknown[] | number,
  ): this
  setData(path: string, data: Buffer | null, version?: number): this
  check(path: string, version?: number): this
  remove(path: string, version?: number): this
  /** `error` (an Error or the package's Exception) is set when any op failed, and none was applied; `results[i].err` is op i's code. */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- the package types `results` as any
  commit(callback: (error: unknown, results: any) => void): void
}
