import type { Namespace } from 'etcd3'
import { InvalidArgumentError } from '../../errors.js'
import type { BackendShortcut } from '../backend.js'
import type { EtcdClientLike } from './client-like.js'
import { etcdElection } from '../election/etcd.js'
import { createEtcdBackend } from './backend.js'

/** `createLocks({ etcd: new Etcd3({ hosts }) })` (or a `client.namespace('…')` of it). */
export const etcdShortcut: BackendShortcut<EtcdClientLike> = {
  create(value, settings) {
    const client = value as Partial<Namespace> | null
    if (
      typeof client !== 'object' ||
      client === null ||
      typeof client.lease !== 'function' ||
      typeof client.watch !== 'function' ||
      typeof client.getAll !== 'function'
    ) {
      throw new InvalidArgumentError('etcd', 'expected an etcd3 client (new Etcd3({ hosts }) from the etcd3 package)')
    }
    return Object.assign(createEtcdBackend(client as Namespace, settings), {
      election: etcdElection(client as Namespace, settings),
    })
  },
}
