// The linter: ESLint's and typescript-eslint's recommended rules, and functions that fit on a
// screen in the library and the demo. Run by `npm test` (npm run lint).
import js from "@eslint/js";
import globals from "globals";
import tseslint from "typescript-eslint";

export default tseslint.config(
  {
    ignores: [
      "dist/",
      ".cache/",
      "node_modules/",
      "test-results/",
      "playwright-report/",
      "test/e2e/fixtures/fresh-app/",
      // Emscripten's output (scripts/build-llamacpp.mjs), committed as built.
      "wasm/",
    ],
  },
  js.configs.recommended,
  tseslint.configs.recommended,
  {
    languageOptions: { globals: { ...globals.browser, ...globals.serviceworker, ...globals.node } },
    rules: {
      // A name that starts with `_` is unused on purpose (a field taken out of an object).
      "@typescript-eslint/no-unused-vars": [
        "error",
        { argsIgnorePattern: "^_", varsIgnorePattern: "^_", destructuredArrayIgnorePattern: "^_" },
      ],
    },
  },
  {
    files: ["src/**/*.ts", "sw/**/*.ts", "demo/**/*.ts"],
    rules: {
      "max-lines-per-function": ["error", { max: 60, skipBlankLines: true, skipComments: false, IIFEs: true }],
    },
  },
);
