// src/openapi.d.ts is what scripts/gen-types.mjs makes of the current
// openapi.json, and index.d.ts names only wire types that exist.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";

import { generate, generateFromFile, outPath, packageDir } from "../scripts/gen-types.mjs";

test("src/openapi.d.ts is up to date with openapi.json (run node scripts/gen-types.mjs)", () => {
  assert.equal(readFileSync(outPath, "utf8"), generateFromFile());
});

test("index.d.ts names only wire types openapi.d.ts exports", () => {
  const generated = new Set([...readFileSync(outPath, "utf8").matchAll(/^export type (\w+) =/gm)].map((m) => m[1]));
  const used = new Set([...readFileSync(join(packageDir, "index.d.ts"), "utf8").matchAll(/\bwire\.(\w+)/g)].map((m) => m[1]));
  assert.ok(used.size > 10, "index.d.ts uses the wire types");
  assert.deepEqual([...used].filter((n) => !generated.has(n)), []);
});

const spec = (schemas) => ({ info: { title: "t", version: "1" }, components: { schemas } });
const body = (text) => text.split("\n").slice(3).join("\n");

test("the generator's translation of JSON Schema", async (t) => {
  const cases = [
    ["nullable string", { A: { type: ["string", "null"] } }, "export type A = string | null;\n"],
    ["enum", { A: { type: "string", enum: ["x", "y"] } }, 'export type A = "x" | "y";\n'],
    ["const", { A: { type: "string", const: "ok" } }, 'export type A = "ok";\n'],
    ["ref and array", { A: { type: "string" }, B: { type: "array", items: { $ref: "#/components/schemas/A" } } },
      "export type A = string;\n\nexport type B = Array<A>;\n"],
    ["map", { A: { type: "object", additionalProperties: { type: "integer" } } },
      "export type A = { [key: string]: number };\n"],
    ["open object", { A: { type: "object" } }, "export type A = { [key: string]: unknown };\n"],
    ["any", { A: {} }, "export type A = unknown;\n"],
    ["oneOf", { A: { oneOf: [{ type: "number" }, { type: "null" }] } }, "export type A = number | null;\n"],
    ["allOf", { A: { type: "object", properties: { a: { type: "string" } }, required: ["a"] },
      B: { allOf: [{ $ref: "#/components/schemas/A" }, { type: "object", properties: { b: { type: "boolean" } } }] } },
      "export type A = {\n  a: string;\n};\n\nexport type B = A & {\n  b?: boolean;\n};\n"],
    ["documented property", { A: { type: "object", properties: { "x-y": { type: "integer", description: "Why.", minimum: 1, default: 2 } } } },
      'export type A = {\n  /**\n   * Why.\n   * @minimum 1\n   * @default 2\n   */\n  "x-y"?: number;\n};\n'],
    ["comment end escaped", { A: { type: "string", description: "a */ b" } }, "/** a *\\/ b */\nexport type A = string;\n"],
  ];
  for (const [name, schemas, want] of cases) {
    await t.test(name, () => assert.equal(body(generate(spec(schemas))), want));
  }
  await t.test("an unresolved $ref is an error", () => {
    assert.throws(() => generate(spec({ A: { $ref: "#/components/schemas/Nope" } })), /unresolved \$ref/);
  });
  await t.test("an unknown type is an error", () => {
    assert.throws(() => generate(spec({ A: { type: "decimal" } })), /unknown JSON Schema type/);
  });
});
