// The package as a user gets it: `npm pack` makes a tarball that installs
// offline into a project of its own, imports there as an ES module, carries
// its type declarations for every export, and works against the live API.

import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, relative, resolve } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

import { ADMIN, freshQueue, PRODUCER, requireEnv, URL, WORKER } from "./helpers.mjs";

const here = dirname(dirname(fileURLToPath(import.meta.url)));

/** Runs npm with args in cwd, offline; fails naming npm when it is not installed. */
function npm(args, cwd, cache) {
  try {
    return execFileSync("npm", [...args, "--cache", cache, "--no-audit", "--no-fund", "--loglevel=error"], {
      cwd,
      encoding: "utf8",
      env: { ...process.env, npm_config_update_notifier: "false", npm_config_offline: "true" },
      stdio: ["ignore", "pipe", "pipe"],
    });
  } catch (err) {
    if (err.code === "ENOENT") throw new Error("npm is needed to test the package (apt-get install npm; .ci/run installs it)");
    throw new Error(`npm ${args.join(" ")} failed: ${err.stderr || err.message}`);
  }
}

// What the scratch project runs: submit a task, serve it with a worker that
// logs a line, print what came back.
const USE = `
import * as dtq from "@dtq/client";
const { Producer, Worker } = dtq;
const queue = process.env.DTQ_QUEUE;
const worker = new Worker({ url: process.env.DTQ_URL, token: process.env.DTQ_WORKER_TOKEN, queues: [queue], wait: 1, signals: false });
worker.handle("double", (task) => { task.log("doubling " + task.payload.n); return task.payload.n * 2; });
const run = worker.run();
const producer = new Producer({ url: process.env.DTQ_URL, token: process.env.DTQ_PRODUCER_TOKEN });
try {
  const t = await producer.submit({ task_type: "double", queue, payload: { n: 21 } });
  const done = await producer.wait(t.task_id, { timeout: 30 });
  const page = await producer.logs(t.task_id);
  console.log(JSON.stringify({ exports: Object.keys(dtq).sort(), version: dtq.VERSION, status: done.status,
    result: done.result, lines: page.items.map((it) => it.line) }));
} finally {
  await worker.stop();
  await run;
  worker.close();
  producer.close();
}
`;

/** The names a .d.ts file exports at its top level. */
function declaredNames(dts) {
  const names = new Set();
  for (const m of dts.matchAll(/^export (?:declare )?(?:const|class|function|type|interface|let) (\w+)/gm)) names.add(m[1]);
  for (const m of dts.matchAll(/^export \* as (\w+) from/gm)) names.add(m[1]);
  return names;
}

test("npm pack makes a package that installs offline, imports, has its types and works", async () => {
  requireEnv();
  const tmp = mkdtempSync(join(tmpdir(), "dtq-pkg-"));
  try {
    const cache = join(tmp, "npm-cache"); // empty: nothing may come from elsewhere
    const packed = JSON.parse(npm(["pack", "--json", "--pack-destination", tmp], here, cache));
    const tgz = join(tmp, packed[0].filename);
    assert.ok(existsSync(tgz), `npm pack made ${tgz}`);

    const app = join(tmp, "app");
    mkdirSync(app);
    writeFileSync(join(app, "package.json"), JSON.stringify({ name: "scratch", private: true, type: "module" }));
    npm(["install", "--offline", tgz], app, cache);
    const pkgDir = join(app, "node_modules", "@dtq", "client");
    const pkg = JSON.parse(readFileSync(join(pkgDir, "package.json"), "utf8"));
    assert.deepEqual(pkg.dependencies ?? {}, {}, "no dependencies");
    const installed = readdirSync(join(app, "node_modules")).filter((n) => !n.startsWith("."));
    assert.deepEqual(installed, ["@dtq"], "nothing else was installed");

    // The types: where package.json points, and every relative import of a
    // declaration file resolves to a declaration file inside the package.
    const typesFile = resolve(pkgDir, pkg.exports["."].types);
    assert.equal(typesFile, resolve(pkgDir, pkg.types));
    const seen = new Set();
    const walk = (file) => {
      if (seen.has(file)) return;
      seen.add(file);
      assert.ok(existsSync(file), `${relative(pkgDir, file)} is in the package`);
      for (const m of readFileSync(file, "utf8").matchAll(/from "(\.[^"]+)"/g)) {
        walk(resolve(dirname(file), m[1].replace(/\.js$/, ".d.ts")));
      }
    };
    walk(typesFile);
    assert.ok(seen.has(join(pkgDir, "src", "openapi.d.ts")), "the generated wire types are in the package");

    // It imports by its name from the scratch project and runs there.
    writeFileSync(join(app, "use.mjs"), USE);
    const out = execFileSync(process.execPath, ["use.mjs"], {
      cwd: app,
      encoding: "utf8",
      env: { ...process.env, DTQ_QUEUE: freshQueue("pkg"), DTQ_URL: URL, DTQ_WORKER_TOKEN: WORKER, DTQ_PRODUCER_TOKEN: PRODUCER, DTQ_ADMIN_TOKEN: ADMIN },
    });
    const got = JSON.parse(out.trim().split("\n").at(-1));
    assert.deepEqual([got.version, got.status, got.result, got.lines], [pkg.version, "succeeded", 42, ["doubling 21"]]);

    // Every name the package exports at run time is declared in its types.
    const declared = declaredNames(readFileSync(typesFile, "utf8"));
    const undeclared = got.exports.filter((n) => !declared.has(n));
    assert.deepEqual(undeclared, [], "exports without a declaration in index.d.ts");
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
});
