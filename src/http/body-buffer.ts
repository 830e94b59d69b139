/**
 * The bytes of one captured body, in few buffers. A handler that writes a byte at a
 * time would otherwise cost one Buffer object (about 100 bytes of heap) per byte: 10 MiB
 * in 1-byte writes peaked at 1.2 GiB. Small writes are copied into slabs that grow with
 * the body (1 KiB, doubling up to 64 KiB); large ones are kept as given, as Node's socket
 * keeps a written buffer until it is flushed. `held` is what the buffer really takes
 * (slab capacity and a per-buffer allowance included): it is what the capture budget counts.
 */

/** Writes below this are copied into a slab; larger ones are kept by reference. */
const SMALL_WRITE = 4 * 1024
const FIRST_SLAB = 1024
const LARGEST_SLAB = 64 * 1024
/** What one Buffer object costs beyond its bytes (object, backing store record), roughly. */
const PER_BUFFER = 96

export class BodyBuffer {
  /** Payload bytes. */
  length = 0
  /** Bytes of memory held for them, counted for the capture budget. */
  held = 0
  private chunks: Buffer[] = []
  private slab: Buffer | undefined
  private slabUsed = 0

  /** Appends a chunk as `res.write` takes it (string with encoding, Buffer or Uint8Array). */
  append(chunk: string | Uint8Array, encoding: BufferEncoding = 'utf8'): void {
    const size = typeof chunk === 'string' ? Buffer.byteLength(chunk, encoding) : chunk.byteLength
    if (size === 0) return
    if (size >= SMALL_WRITE) {
      this.sealSlab()
      this.chunks.push(toBuffer(chunk, encoding))
      this.held += size + PER_BUFFER
    } else {
      const slab = this.slabFor(size)
      if (typeof chunk === 'string') slab.write(chunk, this.slabUsed, size, encoding)
      else slab.set(chunk, this.slabUsed)
      this.slabUsed += size
    }
    this.length += size
  }

  /** The whole body as one buffer; the buffer is empty afterwards. */
  take(): Buffer {
    this.sealSlab()
    const body = this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks, this.length)
    this.clear()
    return body
  }

  clear(): void {
    this.chunks = []
    this.slab = undefined
    this.slabUsed = 0
    this.length = 0
    this.held = 0
  }

  /** The current slab if `size` more bytes fit, else a new one, twice the body so far (bounded). */
  private slabFor(size: number): Buffer {
    if (this.slab && this.slabUsed + size <= this.slab.length) return this.slab
    this.sealSlab()
    const capacity = Math.min(LARGEST_SLAB, Math.max(FIRST_SLAB, this.length, size))
    this.slab = Buffer.allocUnsafe(capacity)
    this.slabUsed = 0
    this.held += capacity + PER_BUFFER
    return this.slab
  }

  /** The filled part of the current slab becomes a chunk; its capacity stays counted until taken. */
  private sealSlab(): void {
    if (!this.slab) return
    if (this.slabUsed > 0) this.chunks.push(this.slab.subarray(0, this.slabUsed))
    this.slab = undefined
    this.slabUsed = 0
  }
}

function toBuffer(chunk: string | Uint8Array, encoding: BufferEncoding): Buffer {
  if (typeof chunk === 'string') return Buffer.from(chunk, encoding)
  return Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength)
}
