import type { Client } from 'node-zookeeper-client'
import { InvalidArgumentError } from '../../errors.js'
import type { BackendShortcut } from '../backend.js'
import type { ZooKeeperClientLike } from './client-like.js'
import { zookeeperElection } from '../election/zookeeper.js'
import { createZooKeeperBackend } from './backend.js'

/** `createLocks({ zookeeper: client })`: a node-zookeeper-client `Client`, `connect()`ed by you. */
export const zookeeperShortcut: BackendShortcut<ZooKeeperClientLike> = {
  create(value, settings) {
    const client = value as Partial<Client> | null
    if (
      typeof client !== 'object' ||
      client === null ||
      typeof client.create !== 'function' ||
      typeof client.getChildren !== 'function' ||
      typeof client.transaction !== 'function' ||
      typeof client.getSessionTimeout !== 'function'
    ) {
      throw new InvalidArgumentError(
        'zookeeper',
        'expected a node-zookeeper-client Client (zookeeper.createClient(…), connected)',
      )
    }
    return Object.assign(createZooKeeperBackend(client as Client, settings), {
      election: zookeeperElection(client as Client, settings),
    })
  },
}
