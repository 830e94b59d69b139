// ESLint flat config: the recommended JavaScript and typescript-eslint rules, without type
// information (fast enough to run on every CI pass). Formatting is Prettier's job.
import js from '@eslint/js'
import tseslint from 'typescript-eslint'

export default tseslint.config(
  { ignores: ['node_modules/', 'dist/', 'load/results/', '**/*.d.ts'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { ecmaVersion: 2022, sourceType: 'module' },
    rules: {
      // `_name` marks a parameter a signature needs and the body does not.
      // Rest parameters of function types (`(...args: any[]) => any`) are the idiom for "any function".
      '@typescript-eslint/no-explicit-any': ['error', { ignoreRestArgs: true }],
      // A named alias of `this` for methods of an object literal that must call back into their owner.
      '@typescript-eslint/no-this-alias': ['error', { allowedNames: ['machine', 'outer'] }],
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' },
      ],
    },
  },
  {
    // Plain Node scripts of the consumer check (scripts/consumer-check.sh), run as they are.
    files: ['test/consumer/*.mjs', 'test/consumer/*.cjs'],
    languageOptions: { globals: { console: 'readonly', process: 'readonly', require: 'readonly' } },
  },
  { files: ['test/consumer/*.cjs'], rules: { '@typescript-eslint/no-require-imports': 'off' } },
)
