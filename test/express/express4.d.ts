// Express 4, installed as the `express4` alias, typed with Express 5's types: the test
// uses only the API both share.
declare module 'express4' {
  import express from 'express'
  export default express
}
