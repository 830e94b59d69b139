/**
 * The etcd3 types as this package's public API names them: by shape, so its `.d.ts` never
 * import `etcd3` (an optional peer) and compile for users who do not install it. The
 * backend itself works on etcd3's own classes (see backend.ts); test/unit/peer-types.test.ts
 * checks that etcd3's classes fit these shapes.
 */

/** An etcd3 client: `new Etcd3({ hosts })`, or a `client.namespace('…')` of one. Checked at run time too. */
export interface EtcdClientLike {
  // Parameters are `never[]`: etcd3's own signatures fit.
  lease(...args: never[]): unknown
  watch(...args: never[]): unknown
  getAll(...args: never[]): unknown
  if(...args: never[]): unknown
}

/**
 * etcd3's `ComparatorBuilder` (a txn), as an etcd lock's `resource.txn()` returns it:
 * `txn().and(…).then(client.put(k).value(v)).else(…).commit()`. The operations you pass
 * to `then`/`else` are etcd3's builders (`client.put(…)`, `client.delete()…`).
 */
export interface EtcdTxnLike {
  and(
    key: string | Buffer,
    column: 'Version' | 'Create' | 'Mod' | 'Value' | 'Lease',
    cmp: '==' | '===' | '>' | '<' | '!=' | '!==',
    value: string | Buffer | number,
  ): EtcdTxnLike
  then(...operations: never[]): EtcdTxnLike
  else(...operations: never[]): EtcdTxnLike
  /** `succeeded`: `false` when a comparison failed (for an owner-checked txn: the lock is gone). */
  commit(): Promise<{ succeeded?: boolean | null }>
}
