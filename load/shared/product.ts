/** The benchmarks' typical API payload: about 600 bytes of JSON, the same in every hit-path bench. */
export const product = (id: number) => ({
  id,
  name: `widget ${id}`,
  price: 9.99,
  currency: 'EUR',
  stock: 42,
  tags: ['blue', 'small', 'metal', 'sale'],
  description: 'A small blue metal widget. '.repeat(12),
  updatedAt: '2026-01-01T00:00:00.000Z',
})
